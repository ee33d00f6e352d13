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

  /// What `absolute` gives by splitting characters.
  static func referenceAbsolute(_ path: String) -> String {
    let full = path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    return "/" + full.split(separator: "/", omittingEmptySubsequences: true).filter { $0 != "." }.joined(separator: "/")
  }

  /// The components as the character-level split sees them: the same as bytes for paths with
  /// no combining mark (one after a slash or a dot joins it into another character).
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

  @Test("absolute paths match the character-level split for 20,000 paths, and clean ones come back as they are")
  func absolute() {
    var clean = 0
    for path in Self.paths(count: 20_000) + ["/", "/a", "/a/.", "/./a", "/a/", "/.a/..b", "/\u{301}a", "a/b"] {
      let made = ImageSource.absolute(path)
      #expect(made.utf8.elementsEqual(Self.referenceAbsolute(path).utf8), "\(path.debugDescription)")
      if made.utf8.elementsEqual(path.utf8) { clean += 1 }
    }
    #expect(clean > 100)  // the fast path's case is among them
  }

  @Test("names are the last component's stem, cleaned, for 20,000 paths")
  func names() {
    let paths =
      Self.paths(count: 20_000) + ["", "/", "a", ".profile", "..", "...", "a.", "..x", "x..", ".a.", "/in/a\r\nb.jpg", "a/b/"]
    for path in paths where !path.unicodeScalars.contains("\u{301}") {
      #expect(ImageSource(path: path).name.utf8.elementsEqual(Self.referenceName(path).utf8), "\(path.debugDescription)")
    }
  }

  @Test("path text: last component, folder, extension and stem for 20,000 paths, with no trap")
  func pathText() {
    for path in Self.paths(count: 20_000) + ["////..///", "a//é", "a//\r\nb", "-", "/-", "x/", "//"]
    where !path.unicodeScalars.contains("\u{301}") {
      let parts = Self.components(path)
      let last = parts.last ?? (path.isEmpty ? "" : "/")
      #expect(PathText.lastComponent(path) == last, "\(path.debugDescription)")
      #expect(PathText.stem(path) == (parts.last.map { Self.referenceSplit($0).stem } ?? last), "\(path.debugDescription)")
      #expect(PathText.pathExtension(path) == (parts.last.map { Self.referenceSplit($0).ext } ?? ""), "\(path.debugDescription)")
      // The folder, its repeated slashes aside, is every component but the last.
      let folder = PathText.folder(path)
      let expected = parts.isEmpty ? last : (path.hasPrefix("/") ? "/" : "") + parts.dropLast().joined(separator: "/")
      #expect(
        Self.components(folder) == Self.components(expected) && folder.hasPrefix("/") == expected.hasPrefix("/"),
        "\(path.debugDescription)")
    }
  }

  @Test(
    "names of paths with characters of several bytes: the last component by its bytes, without the extension, letters of any script kept",
    arguments: [
      ("////é//", "é"), ("a//é.jpg", "é"), ("/in/café.b.jpg", "café.b"), ("dir/ü", "ü"), ("/x/Ω.png/", "Ω"),
      ("/in/€ 1.jpg", "__1"),
      ("a//\r\nb.jpg", "_b"),
    ])
  func namesBeyondASCII(_ example: (path: String, name: String)) {
    // ("a//é" as NSString).lastPathComponent traps in Foundation, as does "a//\r\nb"; naming
    // never goes through it.
    #expect(ImageSource(path: example.path).name.utf8.elementsEqual(example.name.utf8))
  }

  @Test("a name set by the runner is cleaned the same way")
  func setName() {
    var source = ImageSource(path: "/in/a.jpg")
    for stem in Self.paths(count: 2_000) {
      source.name = stem
      let cleaned = stem.map { $0.isLetter || $0.isNumber || "-_.".contains($0) ? $0 : "_" }
      #expect(source.name.utf8.elementsEqual((cleaned.isEmpty ? "image" : String(cleaned)).utf8), "\(stem.debugDescription)")
    }
  }
}
