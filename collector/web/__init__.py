"""The HTTP server: the app, its routes, middleware, auth, limits, run validation in worker processes and settings."""
