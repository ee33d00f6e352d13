import Testing

@testable import DarkroomCLI

/// The guess `darkroom` makes before parsing its command line: a `run` naming a URL other than
/// `file://`, or an input list, starts loading libcurl at once (LazyLibraryTests checks that a
/// run of local files still never loads it).
@Suite("libcurl loaded early for runs that will fetch over HTTP")
struct CurlPreloadTests {
  @Test("runs naming http(s) URLs or an input list load libcurl early; other command lines do not")
  func guess() {
    let early: [[String]] = [
      ["darkroom", "run", "p.json", "https://example.com/a.jpg"],
      ["darkroom", "run", "p.json", "--output", "out", "HTTP://example.com/a.jpg"],
      ["darkroom", "run", "p.json", "--input-list", "urls.txt"],
      ["darkroom", "run", "p.json", "--input-list=-"],
    ]
    let late: [[String]] = [
      ["darkroom", "run", "p.json", "photos", "--cache-dir", "cache"],
      ["darkroom", "run", "p.json", "file:///srv/a.jpg", "FILE:///srv/b.jpg"],
      ["darkroom", "validate", "https://example.com/p.json"],
      ["darkroom", "run"],
      ["darkroom"],
      [],
    ]
    for arguments in early { #expect(DarkroomCommand.mayFetchOverHTTP(arguments), "\(arguments)") }
    for arguments in late { #expect(!DarkroomCommand.mayFetchOverHTTP(arguments), "\(arguments)") }
  }
}
