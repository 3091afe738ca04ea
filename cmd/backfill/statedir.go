package main

import "flag"

// defaultStateDir is where a crawl (or a survey) keeps its state unless
// --state-dir says otherwise.
const defaultStateDir = "backfill-state"

// stateDirFlag registers --state-dir on fs into p, the one definition
// every command shares: def is the command's default (defaultStateDir,
// or "" for one that needs no state), usage says what it keeps or reads
// there.
func stateDirFlag(fs *flag.FlagSet, p *string, def, usage string) {
	fs.StringVar(p, "state-dir", def, usage)
}
