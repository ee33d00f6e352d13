import DarkroomCore
import Foundation
import Testing

/// The byte-level fast paths of ``ImageSource/absolute(_:)`` and ``ImageSource/name`` give what
/// the character-level forms (split and join, Foundation's path methods) give, for every path.
@Suite("Source names and absolute paths")
struct ImageSourceNamingTests {
  /// Pieces paths are made of: separators, dots, names, and what is easy to get wrong (CR LF is one
  /// character, a combining mark joins the character before it, non-ASCII letters are kept).
  static let pieces = [
    "/", "/", "//", ".", "..", "a", "b.c", "photo", "-", "_", " ", "%", "\r", "\n", "é", "\u{301}", "Ω", "x.y.z", "~",
  ]

  /// What `absolute` gives by splitting the bytes.
  static func referenceAbsolute(_ path: String) -> String {
    let full = Array((path.utf8.first == UInt8(ascii: "/") ? path : FileManager.default.currentDirectoryPath + "/" + path).utf8)
    let parts = full.split(separator: UInt8(ascii: "/")).filter { $0 != [UInt8(ascii: ".")] }
    return "/" + parts.map { String(decoding: $0, as: UTF8.self) }.joined(separator: "/")
  }

  /// The components as the character-level split sees them: the same as at slash bytes for paths
  /// with no combining mark (after a slash it joins it into another character; the examples
  /// below cover those).
  static func components(_ path: String) -> [String] { path.split(separator: "/").map(String.init) }

  /// The extension rule, written out on characters: the last dot, unless it begins the name or
  /// the name is "..".
  static func referenceSplit(_ component: String) -> (stem: String, ext: String) {
    guard component.count > 1, component != "..", let dot = component.lastIndex(of: "."), dot != component.startIndex else {
      return (component, "")
    }
    return (String(component[..<dot]), String(component[component.index(after: dot)...]))
  }

  /// What `name` gives: the last component's stem, cleaned character by character.
  static func referenceName(_ path: String) -> String {
    let stem = components(path).last.map { referenceSplit($0).stem } ?? (path.isEmpty ? "" : "/")
    let cleaned = stem.map { $0.isLetter || $0.isNumber || "-_.".contains($0) ? $0 : "_" }
    return cleaned.isEmpty ? "image" : String(cleaned)
  }

  /// Paths of 0 to 7 random pieces, the same ones each run.
  static func paths(count: Int) -> [String] {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    func next() -> Int {
      state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
      return Int(truncatingIfNeeded: state >> 33)
    }
    return (0..<count).map { _ in (0..<(next() % 8)).map { _ in pieces[next() % pieces.count] }.joined() }
  }

  // Each check collects its mismatches and expects none once: 4,000 expectations a test, each
  // with its message, kept the test process's two cooperative threads busy long enough for
  // time-limited tests beside them to miss their limits.

  @Test("a URL with nothing to hide is described as it was written; user and password are hidden")
  func urlDescriptions() {
    let plain = [
      "http://127.0.0.1:8080/a.jpg", "https://example.com/a%20b.jpg?w=300&h=200#frag", "http://[::1]:9000/x/y.png",
      "https://EXAMPLE.com/%E2%82%AC.jpg", "http://h/a;p?q=%25", "https://xn--bcher-kva.example/b.webp", "http://h",
    ]
    for text in plain {
      guard case .url(let url) = ImageSource(text).location else {
        Issue.record("\(text) is not a URL")
        continue
      }
      // What the description was before the fast path: the URL taken apart and put together.
      #expect(ImageSource(text).description == URLComponents(url: url, resolvingAgainstBaseURL: false)?.string)
      #expect(ImageSource(text).description == url.absoluteString)
    }
    #expect(ImageSource("http://alice:s3cret@h/a.jpg").description == "http://***:***@h/a.jpg")
    #expect(ImageSource("http://alice@h/a.jpg").description == "http://***@h/a.jpg")
    #expect(ImageSource("http://:pw@h/a.jpg").description.contains("pw") == false)
  }

  @Test("absolute paths match the split at slash bytes for 4,000 paths, and clean ones come back as they are")
  func absolute() {
    let paths = Self.paths(count: 4_000) + ["/", "/a", "/a/.", "/./a", "/a/", "/.a/..b", "/\u{301}a", "a/b"]
    let made = paths.map { ImageSource.absolute($0) }
    let wrong = zip(paths, made).filter { !$0.1.utf8.elementsEqual(Self.referenceAbsolute($0.0).utf8) }.map(\.0)
    #expect(wrong.isEmpty, "\(wrong.prefix(5).map(\.debugDescription))")
    #expect(zip(paths, made).filter { $0.1.utf8.elementsEqual($0.0.utf8) }.count > 20)  // the fast path's case is among them
  }

  @Test("names are the last component's stem, cleaned, for 4,000 paths")
  func names() {
    let paths =
      Self.paths(count: 4_000) + ["", "/", "a", ".profile", "..", "...", "a.", "..x", "x..", ".a.", "/in/a\r\nb.jpg", "a/b/"]
    let wrong = paths.filter { path in
      !path.unicodeScalars.contains("\u{301}") && !ImageSource(path: path).name.utf8.elementsEqual(Self.referenceName(path).utf8)
    }
    #expect(wrong.isEmpty, "\(wrong.prefix(5).map(\.debugDescription))")
  }

  @Test("path text: last component, folder, extension and stem for 4,000 paths, with no trap")
  func pathText() {
    let paths = Self.paths(count: 4_000) + ["////..///", "a//é", "a//\r\nb", "-", "/-", "x/", "//"]
    let wrong = paths.filter { path in
      guard !path.unicodeScalars.contains("\u{301}") else { return false }
      let parts = Self.components(path)
      let last = parts.last ?? (path.isEmpty ? "" : "/")
      // The folder, its repeated slashes aside, is every component but the last.
      let folder = PathText.folder(path)
      let expected = parts.isEmpty ? last : (path.hasPrefix("/") ? "/" : "") + parts.dropLast().joined(separator: "/")
      return PathText.lastComponent(path) != last
        || PathText.stem(path) != (parts.last.map { Self.referenceSplit($0).stem } ?? last)
        || PathText.pathExtension(path) != (parts.last.map { Self.referenceSplit($0).ext } ?? "")
        || Self.components(folder) != Self.components(expected) || folder.hasPrefix("/") != expected.hasPrefix("/")
    }
    #expect(wrong.isEmpty, "\(wrong.prefix(5).map(\.debugDescription))")
  }

  /// The former `PathText.deletingExtension`, which made the folder part for every path.
  static func referenceDeletingExtension(_ path: String) -> String {
    let bytes = path.utf8
    let slash = UInt8(ascii: "/")
    var end = bytes.endIndex
    while end > bytes.startIndex, bytes[bytes.index(before: end)] == slash { end = bytes.index(before: end) }
    guard end > bytes.startIndex else { return path.isEmpty ? "" : "/" }
    let start = bytes[..<end].lastIndex(of: slash).map { bytes.index(after: $0) } ?? bytes.startIndex
    let component = Substring(bytes[start..<end])
    var folder: [UInt8] = []
    for byte in bytes[..<start] where byte != slash || folder.last != slash { folder.append(byte) }
    let dot = component.lastIndex(of: ".").flatMap { $0 != component.startIndex && component != ".." ? $0 : nil }
    return String(decoding: folder, as: UTF8.self) + component[..<(dot ?? component.endIndex)]
  }

  @Test("a path without its extension, folders kept, as before, for 4,000 paths")
  func deletingExtension() {
    let paths = Self.paths(count: 4_000) + ["", "/", "a", ".a", "..", "a.b.c", "x/", "//x.y//", "a//b/c.jpg/", "é.\u{301}"]
    let wrong = paths.filter { !PathText.deletingExtension($0).utf8.elementsEqual(Self.referenceDeletingExtension($0).utf8) }
    #expect(wrong.isEmpty, "\(wrong.prefix(5).map(\.debugDescription))")
  }

  @Test(
    "names of paths with characters of several bytes: the last component by its bytes, without the extension, letters of any script kept",
    arguments: [
      ("////é//", "é"), ("a//é.jpg", "é"), ("/in/café.b.jpg", "café.b"), ("dir/ü", "ü"), ("/x/Ω.png/", "Ω"),
      ("/in/€ 1.jpg", "__1"),
      ("a//\r\nb.jpg", "_b"), ("a.\u{301}", "a_"), ("..\u{301}", "._"), ("n/\u{301}.webp", "_"),
    ])
  func namesBeyondASCII(_ example: (path: String, name: String)) {
    // ("a//é" as NSString).lastPathComponent traps in Foundation, as does "a//\r\nb"; naming
    // never goes through it.
    #expect(ImageSource(path: example.path).name.utf8.elementsEqual(example.name.utf8))
  }

  @Test(
    "a URL's name is its decoded last segment without the extension: encoded slashes stay in it",
    arguments: [
      ("https://firebasestorage.googleapis.com/v0/b/app/o/users%2F42%2Favatar.jpg?alt=media", "users_42_avatar"),
      ("https://proxy.example/unsafe/https%3A%2F%2Fexample.com%2Fphoto.jpg", "https__example.com_photo"),
      ("http://h/a%2F%2F%0D%0Ab", "a__b"), ("https://example.com/a.b.png", "a.b"), ("https://example.com", "example"),
      ("https://example.com/", "_"),
    ])
  func urlNames(_ example: (url: String, name: String)) {
    #expect(ImageSource(example.url).name == example.name)
  }

  @Test("the same file spelled with a slash before a combining mark, or two, is one source")
  func combiningAfterSlash() {
    #expect(ImageSource.absolute("/in/n/\u{301}.webp").utf8.elementsEqual(ImageSource.absolute("/in/n//\u{301}.webp").utf8))
    #expect(ImageSource(path: "/in/n//\u{301}.webp").identity == ImageSource(path: "/in/n/\u{301}.webp").identity)
  }

  @Test("a name set by the runner is cleaned the same way")
  func setName() {
    var source = ImageSource(path: "/in/a.jpg")
    let wrong = Self.paths(count: 1_000).filter { stem in
      source.name = stem
      let cleaned = stem.map { $0.isLetter || $0.isNumber || "-_.".contains($0) ? $0 : "_" }
      return !source.name.utf8.elementsEqual((cleaned.isEmpty ? "image" : String(cleaned)).utf8)
    }
    #expect(wrong.isEmpty, "\(wrong.prefix(5).map(\.debugDescription))")
  }

}
