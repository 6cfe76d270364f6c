from bundler.entry import main

main()
