// Package records owns the user's records files: reading them as given,
// and the scanners that let them be written back the same way.
//
// A records file is CSV with a header row or JSON Lines, in UTF-8. Read
// (and ReadFrom, for a load that resumes at a Pos) parses it in one pass
// into Records, in file order: a good record with its id, its fields as
// the crawl reads them (trimmed; JSON values as text) and the http(s)
// links to start from, or a malformed line with the reason, its
// "line N" id and its text. Every record keeps its line's bytes (Raw):
// export takes the user's values from them, byte for byte.
//
// ReadBatches is the load loop: the file is parsed on one goroutine while
// the caller (the dispatcher's Load) writes the previous batch, and each
// batch carries the place after it, where a load cut short reads on.
// ReadFile is the same reading for tools that only need the records
// (mappings learn), and Strict refuses a file with any malformed line.
//
// SplitCSVRecord, JSONMembers and SpliceJSON read a record's Raw text the
// way Read read it, for export (store) to give the line back with only the
// filled values changed.
//
// A record's id is the value of its id column (a JSON line's member),
// "id" unless the caller names another (ID), or with IDLine the number
// of the line it starts on. A file without the id column (a JSON Lines
// file whose first record has no such member) is refused with ErrNoID,
// naming a column that differs only in case ("ID"); nothing is numbered
// silently.
//
// The rules for bad input: a line that is not UTF-8, a CSV row with the
// wrong number of cells or a bad quote, a line that is not one JSON
// object (or repeats a key), a line over MaxRecordBytes (kept as given up
// to MaxKeptBytes, for export), a record with no id or an empty one, and
// a record whose id an earlier line had are malformed (a LineError naming
// file:line); a link that is not an http(s) URL, or too long, is a
// warning and the record is kept. A file that is binary, empty, a header
// alone or without the id column is an error for the whole file.
package records
