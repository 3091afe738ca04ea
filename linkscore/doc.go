// Package linkscore owns the scoring of a link for a record before the
// link is fetched: how likely the page it leads to gives the record a
// value it lacks (directly), or leads on, through its own links, to a
// page that does (onward). The crawl's frontier (package dispatcher)
// orders and prunes its tasks by it, and `mappings learn` (package learn)
// looks for its teachers' pages by it.
//
// # Cues
//
// A Cue is what is known of a link for one record without fetching it:
//
//   - Match: a mapping that runs on its URL declares a field the record
//     lacks (without one the page gives the record nothing itself);
//   - Naming: how many of the words of the record's match keys (a name)
//     its address (path and query) or its anchor text holds: all, part,
//     none, or unknown when the record knows no match key (Words, Fold,
//     Address and Name fold both sides alike: accents off, lower case,
//     ł → l, ß → ss);
//   - Values: its address or anchor holds a word of another value the
//     record knows;
//   - Source: what the page it was found on was to the record: its own
//     link (found on no page), a page that gave it values, one that named
//     someone else, or one that did neither;
//   - Fanout: how many links that page had, in buckets (FanoutOf): the one
//     link of a homepage says more than one of a hundred on an index;
//   - Last: it is at the depth limit, so only the page itself counts;
//   - Barren: its host gave no record a value in the pages fetched of it
//     so far, after a bounded number.
//
// # Learning
//
// A Model learns from the run itself which cues led to values, with no
// weight set by hand. Each of its two heads (direct, onward) orders the
// features along a chain, most telling first (direct: naming, source,
// fanout, values, barren; onward: match, source, fanout, naming, values,
// barren), and counts the links observed and those that succeeded for
// every prefix of the chain: all links, those of the cue's naming, those
// of its naming and source, and so on. A link's probability is the rate
// of the links that share its whole chain, each level's rate smoothed
// towards the one before it by PriorWeight pseudo-observations, from 1/2
// for every link: where links like it were seen often, their rate
// decides; where they were not, what is known of links that share its
// first features does. With no observation every estimate is the
// uninformed 1/2. A link's Value is the probability that it pays either
// way: 1 − (1 − direct)(1 − onward), where direct is 0 without Match and
// onward is 0 at the Last depth.
//
// The caller reports what came of each link once it is known: Direct
// when its page was applied to the record (gave it a value or not), and
// Onward when its page's links, followed for the record, led to a value
// (as soon as one does) or did not (once every one of them was done
// with). Unlikely says a link is not worth its request: its Value is
// below PruneBelow while at least MinEvidence links of its very cue (the
// same value of every feature of each chain that matters) were observed,
// so early in a run, with little evidence, nothing is pruned.
//
// A Model is not safe for concurrent use; its memory is fixed (a few
// tables of counts), whatever the size of the crawl.
package linkscore
