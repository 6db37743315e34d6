from ptyd_mcp.cli import main

main()
