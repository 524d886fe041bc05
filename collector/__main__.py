from collector.cli import main

main()
