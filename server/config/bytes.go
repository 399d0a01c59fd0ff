package config

import (
	"fmt"
	"strconv"

	"github.com/dustin/go-humanize"
)

// Bytes is a size setting. Flags, FILA_* variables and the YAML file accept a plain number of
// bytes or a number with a unit: 64MiB, 1.5GiB, 512KiB (powers of 1024) or 64MB, 1GB (powers of
// 1000); a space before the unit is allowed.
type Bytes int

// UnmarshalText parses a size such as 64MiB.
func (b *Bytes) UnmarshalText(text []byte) error {
	n, err := humanize.ParseBytes(string(text))
	if err != nil || n > uint64(maxBytes) {
		return fmt.Errorf("%q is not a size such as 64MiB", text)
	}
	*b = Bytes(n)
	return nil
}

const maxBytes = int(^uint(0) >> 1)

// String prints the size in the largest binary unit that divides it exactly: 64MiB, 1536KiB, 100.
func (b Bytes) String() string {
	for _, u := range []struct {
		name  string
		shift uint
	}{{"TiB", 40}, {"GiB", 30}, {"MiB", 20}, {"KiB", 10}} {
		if b != 0 && b%(1<<u.shift) == 0 {
			return strconv.Itoa(int(b>>u.shift)) + u.name
		}
	}
	return strconv.Itoa(int(b))
}

// MarshalText prints the size as String does.
func (b Bytes) MarshalText() ([]byte, error) { return []byte(b.String()), nil }
