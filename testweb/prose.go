package testweb

import "math/rand/v2"

// Prose draws words the way natural text uses them: from a fixed random
// vocabulary of 5,000 words with a Zipf skew, so that unrelated pages
// share their common words, as real pages do. Tests of text fingerprints
// (exact and near-duplicate pages) build their pages from it.
type Prose struct {
	vocab []string
	zipf  *rand.Zipf
}

// NewProse draws the vocabulary from r, and later the words.
func NewProse(r *rand.Rand) *Prose {
	vocab := make([]string, 5000)
	for i := range vocab {
		b := make([]byte, 2+r.IntN(8))
		for j := range b {
			b[j] = byte('a' + r.IntN(26))
		}
		vocab[i] = string(b)
	}
	return &Prose{vocab: vocab, zipf: rand.NewZipf(r, 1.1, 2, uint64(len(vocab)-1))}
}

// Words returns n words.
func (p *Prose) Words(n int) []string {
	w := make([]string, n)
	for i := range w {
		w[i] = p.vocab[p.zipf.Uint64()]
	}
	return w
}
