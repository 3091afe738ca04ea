package fetch

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"mime"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/saintfish/chardet"
	"golang.org/x/net/html"
	"golang.org/x/net/html/charset"
	"golang.org/x/text/encoding"
)

// What a body is, is decided from its bytes as much as from its headers:
// binaries are recognised by their magic numbers whatever their declared
// type, and text is decoded to UTF-8 from the charset that is declared
// (byte order mark, Content-Type, <meta>), unless the bytes contradict it,
// and otherwise from detection.

// finishBody sets ContentType, Charset and Body on resp from the raw body.
// It returns an error when the body is not text.
func (f *Fetcher) finishBody(resp *Response, contentType string, raw []byte) error {
	declared, label := mediaType(contentType)
	kind, text := sniff(raw, declared)
	resp.ContentType = kind
	if !text {
		resp.Body = raw
		if declared != "" && declared != kind {
			return fmt.Errorf("body is %s, declared %s", kind, declared)
		}
		return fmt.Errorf("body is %s", kind)
	}
	resp.Body, resp.Charset = decodeText(raw, label, isHTMLType(kind))
	return nil
}

// mediaType parses a Content-Type header leniently: lower-cased type
// without parameters, and the charset label if any.
func mediaType(ct string) (string, string) {
	ct = strings.TrimSpace(ct)
	if ct == "" {
		return "", ""
	}
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil {
		if !strings.Contains(mt, "/") {
			return "", strings.TrimSpace(params["charset"])
		}
		return strings.ToLower(mt), strings.TrimSpace(params["charset"])
	}
	// Broken parameters still leave a usable type and often a charset.
	mt, rest, _ := strings.Cut(ct, ";")
	mt = strings.ToLower(strings.TrimSpace(mt))
	if !strings.Contains(mt, "/") {
		mt = ""
	}
	return mt, charsetParam(rest)
}

// charsetParam finds charset=... in a parameter list or meta content.
func charsetParam(s string) string {
	i := strings.Index(strings.ToLower(s), "charset")
	if i < 0 {
		return ""
	}
	s = strings.TrimLeft(s[i+len("charset"):], " \t")
	if !strings.HasPrefix(s, "=") {
		return ""
	}
	s = strings.Trim(strings.TrimLeft(s[1:], " \t"), "\"' ")
	if j := strings.IndexAny(s, "; \t\"'"); j >= 0 {
		s = s[:j]
	}
	return s
}

func isHTMLType(mt string) bool {
	return mt == "text/html" || mt == "application/xhtml+xml"
}

// isTextType reports media types whose body is text worth decoding.
func isTextType(mt string) bool {
	switch {
	case strings.HasPrefix(mt, "text/"),
		strings.HasSuffix(mt, "+xml"), strings.HasSuffix(mt, "+json"),
		mt == "application/xml", mt == "application/json",
		mt == "application/javascript", mt == "application/ecmascript",
		mt == "application/x-javascript":
		return true
	}
	return false
}

// magic lists file signatures of formats that are never pages. Offsets
// are from the start of the body.
var magic = []struct {
	off  int
	sig  string
	kind string
}{
	{0, "%PDF-", "application/pdf"},
	{0, "\x89PNG\r\n\x1a\n", "image/png"},
	{0, "\xff\xd8\xff", "image/jpeg"},
	{0, "GIF87a", "image/gif"},
	{0, "GIF89a", "image/gif"},
	{8, "WEBP", "image/webp"},
	{8, "WAVE", "audio/wav"},
	{8, "AVI ", "video/avi"},
	{0, "II*\x00", "image/tiff"},
	{0, "MM\x00*", "image/tiff"},
	{0, "\x00\x00\x01\x00", "image/x-icon"},
	{4, "ftyp", "video/mp4"},
	{0, "ID3", "audio/mpeg"},
	{0, "OggS", "application/ogg"},
	{0, "fLaC", "audio/flac"},
	{0, "\x1aE\xdf\xa3", "video/webm"},
	{0, "PK\x03\x04", "application/zip"},
	{0, "\x1f\x8b", "application/gzip"},
	{0, "BZh", "application/x-bzip2"},
	{0, "\xfd7zXZ\x00", "application/x-xz"},
	{0, "(\xb5/\xfd", "application/zstd"},
	{0, "Rar!\x1a\x07", "application/vnd.rar"},
	{0, "7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"},
	{0, "\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "application/x-ole-storage"},
	{0, "\x7fELF", "application/x-elf"},
	{0, "wOFF", "font/woff"},
	{0, "wOF2", "font/woff2"},
	{0, "\x00\x01\x00\x00\x00", "font/ttf"},
	{0, "OTTO", "font/otf"},
	{0, "\xca\xfe\xba\xbe", "application/java-vm"},
	{0, "\x00asm", "application/wasm"},
}

// sniff decides the body's media type and whether it is text.
func sniff(b []byte, declared string) (string, bool) {
	for _, m := range magic {
		if len(b) >= m.off+len(m.sig) && string(b[m.off:m.off+len(m.sig)]) == m.sig {
			return m.kind, false
		}
	}
	detected, _ := mediaType(http.DetectContentType(b))
	switch {
	case declared == "" || declared == "application/octet-stream" || declared == "unknown/unknown" || !strings.Contains(declared, "/"):
		if detected == "application/octet-stream" {
			return detected, false
		}
		return detected, isTextType(detected)
	case isTextType(declared):
		if isBinaryType(detected) || mostlyControl(b) {
			if detected == "text/plain" {
				detected = "application/octet-stream"
			}
			return detected, false
		}
		return declared, true
	}
	return declared, false
}

// isBinaryType reports sniffed types that contradict a text declaration.
func isBinaryType(mt string) bool {
	for _, p := range []string{"image/", "audio/", "video/", "font/", "application/pdf", "application/zip",
		"application/x-gzip", "application/vnd.", "application/x-rar", "application/wasm", "application/ogg"} {
		if strings.HasPrefix(mt, p) {
			return true
		}
	}
	return false
}

// mostlyControl reports a sample where control bytes make up more than a
// tenth: no text looks like that, though a page with a few NULs does not.
func mostlyControl(b []byte) bool {
	if len(b) > 1024 {
		b = b[:1024]
	}
	if len(b) == 0 || hasUTF16BOM(b) {
		return false
	}
	n := 0
	for _, c := range b {
		if c < 0x20 && c != '\t' && c != '\n' && c != '\r' && c != '\f' && c != 0x1b {
			n++
		}
	}
	return n*10 > len(b)
}

func hasUTF16BOM(b []byte) bool {
	return bytes.HasPrefix(b, []byte{0xff, 0xfe}) || bytes.HasPrefix(b, []byte{0xfe, 0xff})
}

// decodeText returns b as valid UTF-8 (NUL and invalid bytes replaced by
// U+FFFD) and the name of the charset it was read as. label is the
// Content-Type charset; html enables the <meta> prescan.
func decodeText(b []byte, label string, html bool) ([]byte, string) {
	enc, name := chooseEncoding(b, label, html)
	var out []byte
	if name == "utf-8" {
		out = bytes.TrimPrefix(b, []byte("\xef\xbb\xbf"))
		if !utf8.Valid(out) {
			// Most pages are valid and kept as they are, without a copy.
			out = bytes.ToValidUTF8(out, []byte("\uFFFD"))
		}
	} else {
		var err error
		out, err = enc.NewDecoder().Bytes(stripBOM(b, name))
		if err != nil {
			// The x/text decoders replace bad input themselves; an error
			// here means a transformer gave up, so keep what is readable.
			out, name = bytes.ToValidUTF8(b, []byte("\uFFFD")), "utf-8"
		}
		out = bytes.ToValidUTF8(out, []byte("\uFFFD"))
	}
	if bytes.IndexByte(out, 0) >= 0 {
		out = bytes.ReplaceAll(out, []byte{0}, []byte("\uFFFD"))
	}
	return out, name
}

func stripBOM(b []byte, name string) []byte {
	switch name {
	case "utf-16le", "utf-16be":
		if hasUTF16BOM(b) {
			return b[2:]
		}
	}
	return b
}

// chooseEncoding applies, in order: a byte order mark; the declared
// charset (Content-Type, then <meta>) unless the bytes contradict it;
// UTF-8 when the bytes are UTF-8; detection; windows-1252.
func chooseEncoding(b []byte, label string, isHTML bool) (encoding.Encoding, string) {
	switch {
	case bytes.HasPrefix(b, []byte("\xef\xbb\xbf")):
		return encoding.Nop, "utf-8"
	case bytes.HasPrefix(b, []byte{0xff, 0xfe}):
		return charset.Lookup("utf-16le")
	case bytes.HasPrefix(b, []byte{0xfe, 0xff}):
		return charset.Lookup("utf-16be")
	}
	good, bad := utf8Score(b)
	enc, name := charset.Lookup(label)
	if enc == nil && isHTML {
		// An unknown label in the header is no declaration at all.
		enc, name = charset.Lookup(metaCharset(b))
	}
	if enc != nil {
		if name == "utf-16le" || name == "utf-16be" {
			// Without a BOM a page declaring UTF-16 is in fact ASCII
			// compatible (HTML's own rule).
			enc, name = encoding.Nop, "utf-8"
		}
		switch {
		case name == "utf-8":
			if bad == 0 || good >= bad {
				return encoding.Nop, "utf-8"
			}
		case bad == 0 && good > 0:
			// Non-ASCII bytes that are all valid UTF-8 sequences do
			// not happen by chance in a legacy charset.
			return encoding.Nop, "utf-8"
		case bad == 0 && good == 0:
			return enc, name // pure ASCII reads the same in any of them
		case isLatin(name):
			if e, n, conf := detect(b); e != nil && !isLatin(n) && n != "utf-8" && (conf >= 50 || highRunShare(b) > 0.5) {
				return e, n
			}
			return enc, name
		default:
			if replacementRate(enc, b) <= 0.05 {
				return enc, name
			}
			if e, n, _ := detect(b); e != nil && replacementRate(e, b) < replacementRate(enc, b) {
				return e, n
			}
			return enc, name
		}
	}
	if bad == 0 || good >= bad {
		return encoding.Nop, "utf-8"
	}
	if e, n, conf := detect(b); e != nil && conf >= 10 {
		return e, n
	}
	e, n := charset.Lookup("windows-1252")
	return e, n
}

func isLatin(name string) bool {
	switch name {
	case "windows-1252", "iso-8859-15", "iso-8859-1":
		return true
	}
	return false
}

// highRunShare returns the share of high-bit bytes that stand in runs of
// three or more. Latin-1 text has its accented letters alone among ASCII
// ones ("café"); Cyrillic or Greek in a single-byte charset spells whole
// words in high-bit bytes, so a declared Latin-1 with many such runs is a
// wrong declaration.
func highRunShare(b []byte) float64 {
	if len(b) > detectSample {
		b = b[:detectSample]
	}
	var high, inRuns, run int
	flush := func() {
		if run >= 3 {
			inRuns += run
		}
		run = 0
	}
	for _, c := range b {
		if c >= 0x80 {
			high++
			run++
			continue
		}
		flush()
	}
	flush()
	if high == 0 {
		return 0
	}
	return float64(inRuns) / float64(high)
}

// utf8Score counts valid multi-byte UTF-8 sequences and invalid bytes. A
// tail cut by truncation counts as neither.
func utf8Score(b []byte) (good, bad int) {
	for i := 0; i < len(b); {
		// ASCII, most of any page, eight bytes at a time.
		for i+8 <= len(b) && binary.LittleEndian.Uint64(b[i:])&0x8080808080808080 == 0 {
			i += 8
		}
		if i >= len(b) {
			break
		}
		if b[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 {
			if len(b)-i < utf8.UTFMax && !utf8.FullRune(b[i:]) {
				break
			}
			bad++
		} else {
			good++
		}
		i += size
	}
	return good, bad
}

// replacementRate decodes a sample with enc and returns the share of
// non-ASCII output runes that are U+FFFD.
func replacementRate(enc encoding.Encoding, b []byte) float64 {
	if len(b) > 16<<10 {
		b = b[:16<<10]
	}
	out, err := enc.NewDecoder().Bytes(b)
	if err != nil {
		return 1
	}
	var nonASCII, repl int
	for _, r := range string(out) {
		if r >= utf8.RuneSelf {
			nonASCII++
			if r == utf8.RuneError {
				repl++
			}
		}
	}
	if nonASCII == 0 {
		return 0
	}
	return float64(repl) / float64(nonASCII)
}

// detectSample bounds the bytes handed to the detector.
const detectSample = 64 << 10

// chardetNames maps detector names that are not WHATWG labels.
var chardetNames = map[string]string{
	"GB-18030": "gb18030",
}

// detect guesses the charset of undeclared or misdeclared text. It returns
// the encoding, its canonical name and a confidence from 0 to 100.
func detect(b []byte) (encoding.Encoding, string, int) {
	if len(b) > detectSample {
		b = b[:detectSample]
	}
	results, err := chardet.NewHtmlDetector().DetectAll(b)
	if err != nil {
		return nil, "", 0
	}
	for _, r := range results {
		label := r.Charset
		if l, ok := chardetNames[label]; ok {
			label = l
		}
		if strings.HasPrefix(label, "IBM4") || strings.HasPrefix(label, "UTF-16") || strings.HasPrefix(label, "UTF-32") {
			continue // EBCDIC and BOM-less wide encodings are not worth guessing
		}
		if enc, name := charset.Lookup(label); enc != nil {
			return enc, name, r.Confidence
		}
	}
	return nil, "", 0
}

// metaCharset finds the charset a page declares in a <meta> element
// within its first bytes (HTML's prescan, widened to 4 KiB because real
// pages put long scripts first).
func metaCharset(b []byte) string {
	if len(b) > 4096 {
		b = b[:4096]
	}
	z := html.NewTokenizer(bytes.NewReader(b))
	for {
		switch z.Next() {
		case html.ErrorToken:
			return ""
		case html.StartTagToken, html.SelfClosingTagToken:
			name, more := z.TagName()
			if string(name) == "body" {
				return ""
			}
			if string(name) != "meta" {
				continue
			}
			var cs, equiv, content string
			for more {
				var k, v []byte
				k, v, more = z.TagAttr()
				switch string(k) {
				case "charset":
					cs = strings.TrimSpace(string(v))
				case "http-equiv":
					equiv = strings.ToLower(strings.TrimSpace(string(v)))
				case "content":
					content = string(v)
				}
			}
			if cs != "" {
				return cs
			}
			if equiv == "content-type" {
				if c := charsetParam(content); c != "" {
					return c
				}
			}
		}
	}
}
