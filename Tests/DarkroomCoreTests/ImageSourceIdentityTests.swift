import DarkroomCore
import Foundation
import Testing

/// Sources are told apart by their bytes: on Linux, `café` composed and decomposed, or `K` and the
/// Kelvin sign, are different files, though Swift's `==` on strings takes them for one.
@Suite("Source identity, byte by byte")
struct ImageSourceIdentityTests {
  static let pairs = [("caf\u{E9}.jpg", "cafe\u{301}.jpg"), ("Kat.png", "\u{212A}at.png"), ("x\u{C5}.png", "x\u{212B}.png")]

  @Test("canonically equivalent paths are different sources, identities and keys", arguments: pairs)
  func distinct(_ pair: (String, String)) {
    let one = ImageSource(path: "/in/" + pair.0)
    let other = ImageSource(path: "/in/" + pair.1)
    #expect(pair.0 == pair.1)  // as Swift compares strings
    #expect(one != other)
    #expect(Set([one, other]).count == 2)
    #expect(one.identity != other.identity && one.requestIdentity != other.requestIdentity)
    #expect(
      CacheKey.make(prefix: "", source: one.identity, upstream: [])
        != CacheKey.make(prefix: "", source: other.identity, upstream: []))
    #expect(ImageSource(path: "/in/" + pair.0) == one)
  }

  @Test("identities hold no byte outside printable ASCII: not the key separator, not a name's percent sign as is")
  func escaped() {
    let source = ImageSource(path: "/in/a\u{1F}b 100%.jpg")
    #expect(source.identity == "file:/in/a%1Fb%20100%25.jpg")
    #expect(ImageSource(path: "/in/a%25.jpg").identity != ImageSource(path: "/in/a%.jpg").identity)
    // For URLs `%` stays as it is: `é` and `%C3%A9` name one resource.
    #expect(ImageSource("https://example.com/caf%C3%A9.jpg").identity.hasSuffix("/caf%C3%A9.jpg"))
  }
}
