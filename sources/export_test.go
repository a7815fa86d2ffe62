package sources

// CAForm returns the form ca is held in ('d' DER, 'p' PEM as given, 'b'
// base64 as given, 0 for no CA) and the bytes it holds.
func CAForm(ca CA) (form byte, size int) {
	if ca.v() == "" {
		return 0, 0
	}
	return ca.v()[0], len(ca.v())
}
