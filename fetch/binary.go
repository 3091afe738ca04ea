package fetch

import (
	"net/url"
	"path"
	"strings"
)

// binaryExt lists file extensions of formats that never hold a page's
// fields: links to them are dropped before any request is spent on them.
var binaryExt = map[string]bool{}

func init() {
	for _, e := range strings.Fields(`
		jpg jpeg png gif webp bmp ico tif tiff svgz heic avif psd raw
		pdf ps eps djvu
		zip gz tgz bz2 xz zst 7z rar tar iso dmg img
		exe msi bin apk deb rpm jar war dll so class wasm
		mp3 m4a aac wav ogg oga flac opus wma mid midi
		mp4 m4v mov avi mkv webm wmv flv mpg mpeg 3gp ogv
		woff woff2 ttf otf eot
		doc docx xls xlsx ppt pptx odt ods odp rtf
		swf torrent`) {
		binaryExt[e] = true
	}
}

// IsBinaryPath reports whether u's path names a binary file type (an
// image, archive, document, media or font file), judged by its extension.
func IsBinaryPath(u *url.URL) bool {
	if u == nil {
		return false
	}
	ext := path.Ext(u.Path)
	if len(ext) < 2 {
		return false
	}
	return binaryExt[strings.ToLower(ext[1:])]
}
