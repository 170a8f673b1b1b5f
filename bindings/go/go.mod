module metrale.dev/metrale

go 1.19
