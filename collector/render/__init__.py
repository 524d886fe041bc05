"""Rendering of comparison data: Markdown, self-contained HTML, inline SVG charts, CSV."""
