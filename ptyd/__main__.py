from ptyd.cli import main

main()
