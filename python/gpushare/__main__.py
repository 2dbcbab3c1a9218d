from gpushare._cli import main

main()
