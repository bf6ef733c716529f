from corral.cli.main import main

main()
