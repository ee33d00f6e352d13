import Foundation
import Testing

@testable import DarkroomCurl

/// Response header lines as libcurl hands them over, taken apart on their bytes.
@Suite("Response header lines")
struct HeaderLineTests {
  /// The former reading, through Foundation, for lines of ASCII (where the two must agree).
  static func reference(_ line: String, into headers: inout [String: String]) {
    let trimmed = line.trimmingCharacters(in: .whitespacesAndNewlines)
    if line.hasPrefix("HTTP/") {  // a status line starts at the line's start
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

  @Test("a folded line continues the field before it with one space; each Content-Type line is kept apart")
  func foldingAndContentTypes() {
    var fields = HeaderFields()
    for line in [
      "HTTP/1.1 302 Found\r\n", "Content-Type: text/html\r\n", "\r\n", "HTTP/1.1 200 OK\r\n", "Content-Type: image/jpeg\r\n",
      " , text/html\r\n", "X-Long: a\r\n", "\t b \r\n", "Content-Type: image/png; x=\"\r\n", "content-type: text/plain\r\n",
      "no colon\r\n", " orphan\r\n",
    ] {
      CurlTransfer.parseHeader(line, into: &fields)
    }
    #expect(fields.contentTypes == ["image/jpeg , text/html", "image/png; x=\"", "text/plain"])
    #expect(fields.values["content-type"] == "image/jpeg , text/html, image/png; x=\", text/plain")
    #expect(fields.values["x-long"] == "a b", "a folded line after a line without a colon continues nothing")
    #expect(fields.values.count == 2)
  }

  @Test("a fold of spaces keeps the field open; only a response's first line is its status line")
  func statusLinesAndBlankFolds() {
    var fields = HeaderFields()
    for line in [
      "HTTP/1.1 200 OK\r\n", "Content-Type: text/html\r\n", " HTTP/1.1 200 OK\r\n", "HTTP/1.1: x\r\n",
      "Content-Type: image/jpeg\r\n", " \r\n", "\t\r\n", " , text/html\r\n",
    ] {
      #expect(!fields.isStatusLine(UnsafeRawBufferPointer(start: nil, count: 0)))
      CurlTransfer.parseHeader(line, into: &fields)
    }
    #expect(fields.contentTypes == ["text/html HTTP/1.1 200 OK", "image/jpeg , text/html"])
    #expect(fields.values["http/1.1"] == "x")
    // After the blank line that ends a response's fields, the next line opens the next response.
    let status = Array("HTTP/1.1 200 OK\r\n".utf8)
    status.withUnsafeBytes { #expect(!fields.isStatusLine($0)) }
    CurlTransfer.parseHeader("\r\n", into: &fields)
    status.withUnsafeBytes { #expect(fields.isStatusLine($0)) }
    CurlTransfer.parseHeader("HTTP/1.1 200 OK\r\n", into: &fields)
    #expect(fields.values.isEmpty && fields.contentTypes.isEmpty)
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

/// Header values that reach messages and waits: the odd ones a hostile server can send.
@Suite("Retry-After and Content-Type values")
struct HeaderValueTests {
  @Test("Retry-After is whole seconds or a date, at most 60 s, whatever its size")
  func retryAfter() {
    #expect(HTTPOutcomeClassifier.retryAfter("0") == .zero)
    #expect(HTTPOutcomeClassifier.retryAfter(" 7\t") == .seconds(7))
    #expect(HTTPOutcomeClassifier.retryAfter("120") == .seconds(60))
    #expect(HTTPOutcomeClassifier.retryAfter("99999999999999999999999999") == .seconds(60))
    #expect(HTTPOutcomeClassifier.retryAfter(String(repeating: "9", count: 5000)) == .seconds(60))
    for refused in ["", " ", "-1", "+5", "5s", "1.5", "٣", "0x10"] {
      #expect(HTTPOutcomeClassifier.retryAfter(refused) == nil, "\(refused)")
    }
    #expect(HTTPOutcomeClassifier.retryAfter(nil) == nil)
    #expect(HTTPOutcomeClassifier.retryAfter("Fri, 31 Dec 9999 23:59:59 GMT") == .seconds(60))
    #expect(HTTPOutcomeClassifier.retryAfter("Thu, 01 Jan 1970 00:00:00 GMT") == .zero)
  }

  @Test("a content type that is missing or blank is named so in messages")
  func describedContentType() {
    #expect(HTTPOutcomeClassifier.described(nil) == "no content type")
    #expect(HTTPOutcomeClassifier.described("") == "an empty content type")
    #expect(HTTPOutcomeClassifier.described(" \t ") == "an empty content type")
    #expect(HTTPOutcomeClassifier.described(" text/html ") == "text/html")
  }

  @Test("a media type is two tokens around one slash")
  func mediaTypeTokens() {
    for good in ["image/jpeg", "image/svg+xml", "application/vnd.x-y_z", "a/b"] {
      #expect(HTTPOutcomeClassifier.isMediaType(good), "\(good)")
    }
    for bad in [
      "image/", "/jpeg", "image", "image/ jpeg", "image/jpeg text/html", "image/jpeg/x", "image/jp\u{E9}g", "image/jpeg\r", "",
    ] {
      #expect(!HTTPOutcomeClassifier.isMediaType(bad), "\(bad.debugDescription)")
    }
  }

  @Test("a Content-Type that came more than once names each of its media types; a quoted comma does not split")
  func mediaTypes() {
    #expect(HTTPOutcomeClassifier.mediaTypes(in: "image/JPEG") == ["image/jpeg"])
    #expect(HTTPOutcomeClassifier.mediaTypes(in: "image/png, text/html") == ["image/png", "text/html"])
    #expect(HTTPOutcomeClassifier.mediaTypes(in: " image/png ;q=1,\ttext/html; charset=utf-8") == ["image/png", "text/html"])
    #expect(HTTPOutcomeClassifier.mediaTypes(in: #"image/jpeg; name="a,b", image/png"#) == ["image/jpeg", "image/png"])
    #expect(HTTPOutcomeClassifier.mediaTypes(in: #"image/jpeg; name="a\",b""#) == ["image/jpeg"])
    #expect(HTTPOutcomeClassifier.mediaTypes(in: "image/png, ") == ["image/png", ""])
    #expect(HTTPOutcomeClassifier.mediaTypes(in: ",\u{301}image/png") == ["", "\u{301}image/png"])
    #expect(HTTPOutcomeClassifier.mediaTypes(in: "") == [""])
  }
}

/// The origin key a transfer is placed by (``CurlTransferLoops/originKey(_:)``), read on bytes.
@Suite("Origin keys of URLs")
struct OriginKeyTests {
  /// The former reading, through Foundation's `range(of:)`.
  static func reference(_ url: String) -> String {
    guard let separator = url.range(of: "://") else { return url }
    let authority = url[separator.upperBound...]
    let end = authority.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? authority.endIndex
    return String(url[..<end])
  }

  @Test("scheme and authority as written, the path, query and fragment left off, as before")
  func keys() {
    let urls = [
      "http://127.0.0.1:8080/img000.jpg", "https://a.example/x?y=1", "https://a.example#f", "https://a.example",
      "http://user:pw@h:1/p", "no scheme here", "://x/y", "a:/b", "a:b://c/d", "https://é.example/ü", "http://",
      "http:///", "x://y://z/w", "https://[::1]:8443/a", "",
    ]
    for url in urls { #expect(CurlTransferLoops.originKey(url) == Self.reference(url), "\(url)") }
    let alphabet = Array("ab:/?#é.")
    var mismatches: [String] = []
    for _ in 0..<20_000 {
      let url = String((0..<Int.random(in: 0...12)).map { _ in alphabet.randomElement() ?? "a" })
      if CurlTransferLoops.originKey(url) != Self.reference(url) { mismatches.append(url) }
    }
    #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
  }
}
