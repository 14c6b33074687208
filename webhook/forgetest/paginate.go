package forgetest

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"
)

// pageWindow is one page of a listing as the stand-ins cut it: the page number (from 1), its
// size, the number of items and of pages, and the items' bounds lo:hi.
type pageWindow struct {
	page, size, total, pages, lo, hi int
}

// cutPage reads the page number (page) and the page size (sizeParam; def when missing, at
// most maxSize, and at most capSize when positive) from q and returns the window over total
// items.
func cutPage(q url.Values, sizeParam string, def, maxSize, capSize, total int) pageWindow {
	size, _ := strconv.Atoi(q.Get(sizeParam))
	if size <= 0 {
		size = def
	}
	size = min(size, maxSize)
	if capSize > 0 {
		size = min(size, capSize)
	}
	page, _ := strconv.Atoi(q.Get("page"))
	page = max(page, 1)
	return pageWindow{page: page, size: size, total: total, pages: max((total+size-1)/size, 1),
		lo: min((page-1)*size, total), hi: min(page*size, total)}
}

// pageLink is a Link header entry (RFC 8288) for page p of r's listing, the page size in
// sizeParam.
func pageLink(r *http.Request, sizeParam string, size, p int, rel string) string {
	u := *r.URL
	u.Scheme, u.Host = "http", r.Host
	q := u.Query()
	q.Set("page", strconv.Itoa(p))
	q.Set(sizeParam, strconv.Itoa(size))
	u.RawQuery = q.Encode()
	return fmt.Sprintf(`<%s>; rel="%s"`, u.String(), rel)
}
