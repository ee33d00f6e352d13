import DarkroomCore
import Foundation
import Testing

@testable import DarkroomCore

/// The readings made on bytes for speed (every request's address, every response's dates) read
/// what the readings they replaced read: each is checked against that reading, kept here.
@Suite("Fast readings of addresses and dates")
struct FastParseTests {
  /// The former IPv4 reading: four dot-separated parts of one to three characters, each a UInt8.
  static func referenceIPv4(_ text: String) -> [UInt8]? {
    let parts = text.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 4 else { return nil }
    var bytes: [UInt8] = []
    for part in parts {
      guard !part.isEmpty, part.count <= 3, let value = UInt8(part) else { return nil }
      bytes.append(value)
    }
    return bytes
  }

  @Test("dotted IPv4 addresses read as before; a sign before a part is now refused")
  func ipv4() {
    let cases = [
      "127.0.0.1", "0.0.0.0", "255.255.255.255", "256.1.1.1", "1.2.3", "1.2.3.4.5", "1..2.3", ".1.2.3", "1.2.3.",
      "01.02.03.004", "1.2.3.0004", "a.b.c.d", "1.2.3.4 ", " 1.2.3.4", "", "...", "999.999.999.999", "1.2.3.٣",
    ]
    for text in cases { #expect(AddressRange.parseAddress(text) == Self.referenceIPv4(text), "\(text)") }
    var mismatches: [String] = []
    let alphabet = Array("0123456789...+-a ")
    for _ in 0..<20_000 {
      let text = String((0..<Int.random(in: 0...16)).map { _ in alphabet.randomElement() ?? "0" })
      let signed = text.contains("+") || text.contains("-")
      if !signed, AddressRange.parseAddress(text) != Self.referenceIPv4(text) { mismatches.append(text) }
      if signed { #expect(AddressRange.parseAddress(text) == nil, "\(text)") }
    }
    #expect(mismatches.isEmpty, "\(mismatches.prefix(5))")
    // UInt8("+1") is 1: the former reading took "+1.2.3.4" for 1.2.3.4. An address has no sign.
    #expect(Self.referenceIPv4("+1.2.3.4") == [1, 2, 3, 4])
    #expect(AddressRange.parseAddress("+1.2.3.4") == nil)
  }

  @Test("an HTTP date in the form servers send reads as the part-by-part reading reads it")
  func canonicalDates() {
    let formatted = (0..<2_000).map { _ in
      HTTPDate.format(Date(timeIntervalSince1970: Double(Int.random(in: 0...253_402_300_799))))
    }
    for text in formatted {
      #expect(HTTPDate.parseFixdate(text) == HTTPDate.parseFixdate(text + " "), "\(text)")
      #expect(HTTPDate.parseFixdate(text).map(HTTPDate.format) == text)
    }
    // Texts of the canonical length the fast reading refuses, which the part-by-part one reads
    // (or refuses) for itself.
    let odd = [
      "Sun, 06 nov 1994 08:49:37 GMT", "Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 06 Nov 1969 08:49:37 GMT",
      "Sun, 06 Nov 1994 24:49:37 GMT", "Sun, 06 Nov 1994 08:60:37 GMT", "Sun, 06 Nov 1994 08:49:61 GMT",
      "Sun, 06 Nov 1994 08:49:60 GMT", "Sun, 00 Nov 1994 08:49:37 GMT", "Sun, 06 Xyz 1994 08:49:37 GMT",
      "Sun, 06 Nov 1994 08:49:37 UTC", "Sun,  6 Nov 1994 08:49:37 GMT", "S n, 06 Nov 1994 08:49:37 GMT",
      "Sun, +6 Nov 1994 08:49:37 GMT", "Sun, 06 Nov +994 08:49:37 GMT", "Sun, 06 N v 1994 08:49:37 GMT",
    ]
    for text in odd {
      #expect(text.utf8.count == 29)
      #expect(HTTPDate.parseFixdate(text) == HTTPDate.parseFixdate(text + " "), "\(text)")
    }
    #expect(HTTPDate.parseFixdate("Sun, 06 nov 1994 08:49:37 GMT")?.timeIntervalSince1970 == 784_111_777)
    #expect(HTTPDate.parseFixdate("Sun, 06 Nov 1994 08:49:60 GMT")?.timeIntervalSince1970 == 784_111_800)
    #expect(HTTPDate.parseFixdate("Sun,  6 Nov 1994 08:49:37 GMT")?.timeIntervalSince1970 == 784_111_777)
    #expect(HTTPDate.parseFixdate("Sun, 32 Nov 1994 08:49:37 GMT") == nil)
    // Found by attacking the fast reading: U+0600 (a prepend mark) joins the comma after it into
    // one character, so the weekday part has no comma of its own and the date is refused, as the
    // part-by-part reading refused it (an invalid Expires is stale, not fresh until 2099).
    let prepended = "a\u{0600}, 01 Jan 2099 00:00:00 GMT"
    #expect(prepended.utf8.count == 29)
    #expect(HTTPDate.parseFixdate(prepended) == nil)
    #expect(HTTPDate.parse(prepended) == nil)
    var mismatches: [String] = []
    let marks: [Character] = ["\u{0600}", "\u{0301}", "\u{200D}", "é", "\r", "\t", ",", " ", "a"]
    for _ in 0..<5_000 {
      var text = Array("Sun, 06 Nov 1994 08:49:37 GMT")
      let mark = marks.randomElement() ?? "a"
      let index = Int.random(in: 0...(text.count - mark.utf8.count))
      // A mark of n bytes takes the place of n characters: the text keeps its 29 bytes.
      text.replaceSubrange(index..<(index + mark.utf8.count), with: [mark])
      let candidate = String(text)
      guard candidate.utf8.count == 29 else { continue }
      if HTTPDate.parseFixdate(candidate) != HTTPDate.parseFixdate(candidate + " ") { mismatches.append(candidate) }
    }
    #expect(mismatches.isEmpty, "\(mismatches.prefix(5).map(\.debugDescription))")
  }
}
