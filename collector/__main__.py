from collector.cli.main import main

main()
