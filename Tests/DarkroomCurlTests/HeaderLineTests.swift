import Foundation
import Testing

@testable import DarkroomCurl

/// Response header lines as libcurl hands them over, taken apart on their bytes.
@Suite("Response header lines")
struct HeaderLineTests {
  /// The former reading, through Foundation, for lines of ASCII (where the two must agree).
  static func reference(_ line: String, into headers: inout [String: String]) {
    let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
    if trimmed.hasPrefix("HTTP/") {
      headers = [:]
      return
    }
    guard let colon = trimmed.firstIndex(of: ":") else { return }
    let name = trimmed[..<colon].lowercased()
    let value = trimmed[trimmed.index(after: colon)...].trimmingCharacters(in: .whitespaces)
    headers[name] = headers[name].map { "\($0), \(value)" } ?? value
  }

  @Test("status lines reset, names are lower-cased, repeats are joined, values lose the spaces around them")
  func lines() {
    var headers: [String: String] = [:]
    for line in [
      "HTTP/1.1 301 Moved\r\n", "Location: /b\r\n", "HTTP/1.1 200 OK\r\n", "Content-Type:\timage/jpeg \r\n",
      "Set-Cookie: a=1\r\n", "set-cookie:b=2\r\n", "X-Empty:\r\n", "no colon here\r\n", "\r\n", "ETag: \"x:y\"\r\n",
      "X-Ünï: café\r\n",
    ] {
      CurlTransfer.parseHeader(line, into: &headers)
    }
    #expect(
      headers == [
        "content-type": "image/jpeg", "set-cookie": "a=1, b=2", "x-empty": "", "etag": "\"x:y\"", "x-ünï": "café",
      ])
  }

  @Test("20,000 random ASCII lines read as Foundation read them")
  func randomASCII() {
    let alphabet = Array("aB:  \t\r\nHTTP/1.1 xyz:;,=\"-\u{0B}\u{0C}".unicodeScalars)
    var mismatches: [String] = []
    for _ in 0..<20_000 {
      let line = String(String.UnicodeScalarView((0..<Int.random(in: 0...14)).map { _ in alphabet.randomElement() ?? "a" }))
      var ours = ["seed": "v"]
      var theirs = ours
      CurlTransfer.parseHeader(line, into: &ours)
      Self.reference(line, into: &theirs)
      if ours != theirs { mismatches.append(line.debugDescription) }
    }
    #expect(mismatches.count == 0, "\(mismatches.prefix(5))")
  }
}
