package learn

import (
	"context"
	"fmt"
	"testing"
)

// TestLearnDatesAndNumbersAsValues: the records write a day and a price
// one way, the pages another ("1995-05-04" is "4 May 1995", "1234.5" is
// "1,234.50"); both are found and learned, and the learned rules take
// the pages' own text, which reads as the records' values.
func TestLearnDatesAndNumbersAsValues(t *testing.T) {
	ps := pageSet{}
	var ts []Teacher
	type item struct{ day, price string }
	var items []item
	for i := 0; i < 10; i++ {
		items = append(items, item{fmt.Sprintf("19%02d-%02d-%02d", 80+i, 1+i, 3+i*2), fmt.Sprintf("%d%03d.%d", 1+i, 234+i, 5)})
	}
	months := []string{"January", "February", "March", "April", "May", "June", "July", "August", "September", "October"}
	for i, it := range items {
		u := fmt.Sprintf("http://goods.example/item/%d", i)
		page := pageHTML(fmt.Sprintf(`<h1 class="name">Item %d</h1><p>Released on <span class="day">%d %s 19%02d</span>.</p><p class="price">Price: $%d,%03d.%d0</p>`,
			i, 3+i*2, months[i], 80+i, 1+i, 234+i, 5))
		ps[u] = &Page{URL: u, ContentType: "text/html", Body: []byte(page)}
		if i < 6 {
			ts = append(ts, Teacher{ID: fmt.Sprint("i", i), Links: []string{u}, Values: map[string]string{"name": fmt.Sprintf("Item %d", i), "released": it.day, "price": it.price}})
		}
	}
	res, err := Learn(context.Background(), ts, ps, Options{Fields: []string{"released", "price"}, MatchKey: "name"})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"released", "price"} {
		if f := fieldResult(t, res, name); f.Status != Learned {
			t.Fatalf("%s: %s (%s)", name, f.Status, f.Reason)
		} else {
			t.Logf("%s: %s", name, f.Rule)
		}
	}
	set, _ := writeLearned(t, res)
	for i := 6; i < len(items); i++ {
		got := fieldsOn(set, ps[fmt.Sprintf("http://goods.example/item/%d", i)])
		if !kindDate.same(got["released"], items[i].day) || !kindNumber.same(got["price"], items[i].price) || got["price"] != fmt.Sprintf("%d,%03d.50", i+1, 234+i) {
			t.Errorf("item %d: released %q, price %q; want the day %s and the price %s", i, got["released"], got["price"], items[i].day, items[i].price)
		}
	}
	for _, c := range []struct {
		k    kind
		a, b string
		same bool
	}{
		{kindDate, "1995-05-04", "4 May 1995", true},
		{kindDate, "1995-05-04", "5 April 1995", false},
		{kindNumber, "1234.5", "1,234.50", true},
		{kindNumber, "1234.5", "1,234.05", false},
		{kindNumber, "1234.5", "Price: $1,234.50", false},
	} {
		if got := c.k.same(c.a, c.b); got != c.same {
			t.Errorf("same(%q, %q) = %v", c.a, c.b, got)
		}
	}
	if k := kindOf([]string{"02134", "10001"}); k != kindString {
		t.Errorf("postal codes are text, not numbers: kind %d", k)
	}
}
