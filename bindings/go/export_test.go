package metrale

// Unexported helpers the external tests (package metrale_test) use.
var (
	CountersCWords = countersCWords
	SiteFile       = siteFile
	SiteFileIn     = siteFileIn
	OwnModule      = ownModule
)
