package store

import "backfill/resolver"

// sqliteDNSTable is the table of the DNS cache, in the shape
// resolver.SQLStore reads and writes (see the schema's migration).
const sqliteDNSTable = "dns"

// Names keeps the DNS cache in the file's dns table, through the writer
// connection: a look-up that misses writes next, and the memory cache in
// front answers the rest.
func (s *sqliteStore) Names() resolver.Store { return resolver.NewSQLStore(s.w, sqliteDNSTable) }
