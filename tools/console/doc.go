// Package console holds the web console's browser test: it builds fila-server, starts it with
// authentication on, fills a few queues through the SDK and drives the console in headless
// Chromium (Debian's chromium package; .ci/run installs it) with chromedp. Without a Chromium
// binary the test skips and says why. Screenshots go to $FILA_CONSOLE_SCREENSHOTS, or to the
// test's temporary directory, and their paths are logged; docs/console.md's pictures are these
// (FILA_CONSOLE_SCREENSHOTS=$PWD/docs go test ./tools/console/).
package console
