import Foundation

/// Where an image comes from: a local path, a `file://` URL, or (with the HTTP fetcher) an
/// `http(s)://` URL, plus request options.
///
/// This is the input of every pipeline that starts with a `fetch` stage.
///
/// ```swift
/// let local = ImageSource("Examples/images/dunes.jpg")
/// let remote = ImageSource("https://example.com/a.jpg", headers: ["Referer": "https://example.com"])
/// ```
public struct ImageSource: Sendable, Hashable, CustomStringConvertible, PipelineValue {
  public static let valueDescription = "a source"

  /// What the source names.
  public enum Location: Sendable, Hashable {
    /// A path on the local file system (relative paths resolve against the working directory).
    case file(path: String)
    /// A URL of another scheme (`http`, `https`, `data`…), fetched by a stage that supports it.
    case url(URL)
    /// Text that names a URL scheme (`http://…`) but is not a valid URL; fetching it fails with
    /// `invalidInput` instead of looking for a file of that name.
    case malformed(String)

    /// Byte by byte: two paths are one file only when their bytes are equal (Swift's `==` on
    /// strings takes `café` composed and decomposed, two files on Linux, for one).
    public static func == (lhs: Location, rhs: Location) -> Bool {
      switch (lhs, rhs) {
      case (.file(let one), .file(let other)), (.malformed(let one), .malformed(let other)): one.utf8.elementsEqual(other.utf8)
      case (.url(let one), .url(let other)): one.absoluteString.utf8.elementsEqual(other.absoluteString.utf8)
      default: false
      }
    }

    public func hash(into hasher: inout Hasher) {
      switch self {
      case .file(let path):
        hasher.combine(0)
        for byte in path.utf8 { hasher.combine(byte) }
      case .url(let url):
        hasher.combine(1)
        for byte in url.absoluteString.utf8 { hasher.combine(byte) }
      case .malformed(let text):
        hasher.combine(2)
        for byte in text.utf8 { hasher.combine(byte) }
      }
    }
  }

  /// The location to fetch.
  public var location: Location
  /// Extra request headers for network fetches (ignored for files).
  public var headers: [String: String]

  /// Creates a source from a path, a `file://` URL or another URL string.
  public init(_ string: String, headers: [String: String] = [:]) {
    self.headers = headers
    if string.hasPrefix("file://"), let url = URL(string: string), url.isFileURL {
      location = .file(path: url.path)
    } else if let schemeEnd = string.firstIndex(of: ":"), string.distance(from: string.startIndex, to: schemeEnd) > 1,
      string[..<schemeEnd].allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." })
    {
      if let url = URL(string: string), url.scheme != nil {
        location = .url(url)
      } else if string[schemeEnd...].hasPrefix("://") || string.lowercased().hasPrefix("data:") {
        location = .malformed(string)
      } else {
        location = .file(path: string)
      }
    } else {
      location = .file(path: string)
    }
  }

  /// Creates a source for a local file path.
  public init(path: String) {
    location = .file(path: path)
    headers = [:]
  }

  /// Creates a source for a URL (a file URL becomes a file source).
  public init(url: URL, headers: [String: String] = [:]) {
    location = url.isFileURL ? .file(path: url.path) : .url(url)
    self.headers = headers
  }

  /// The source as a person would write it; credentials in URLs are redacted.
  public var description: String {
    switch location {
    case .file(let path): return path
    case .malformed(let text): return ImageSource.redacted(text)
    case .url(let url):
      if url.scheme?.lowercased() == "data" { return "data:… (\(url.absoluteString.utf8.count) characters)" }
      // Nothing to hide: the URL as it is (taking it apart costs ~10 µs, and every operation
      // and error names its source).
      if url.user == nil, url.password == nil { return url.absoluteString }
      guard var parts = URLComponents(url: url, resolvingAgainstBaseURL: false) else { return url.absoluteString }
      if parts.password != nil { parts.password = "***" }
      if parts.user != nil { parts.user = "***" }
      return parts.string ?? url.absoluteString
    }
  }

  /// The source itself, unredacted: `file:` and the absolute path of a file (a relative path is
  /// made absolute against the working directory, `.` removed; `..` is kept, since what it means
  /// depends on the symlinks before it), or the full URL. In-flight work is shared by it; cache
  /// stores record ``resolved`` (symlinks and `..` resolved) so that
  /// ``CacheStore/purge(source:)`` finds every entry of a file however its path was spelled.
  public var identity: String {
    switch location {
    case .file(let path): return "file:" + ImageSource.byteExact(ImageSource.absolute(path), escapingPercent: true)
    case .url(let url): return ImageSource.byteExact(url.absoluteString, escapingPercent: false)
    case .malformed(let text): return "malformed:" + ImageSource.byteExact(text, escapingPercent: true)
    }
  }

  /// `text` with every byte outside printable ASCII written as `%XX` (and `%` itself for paths),
  /// so that two identities are equal exactly when their bytes are. Swift compares strings by
  /// canonical equivalence, but `café` composed and decomposed are two files on Linux: as keys of
  /// sets and dictionaries (de-duplication, shared work, caches) they must never be one. For URLs
  /// `%` stays: `é` and `%C3%A9` name the same resource.
  static func byteExact(_ text: String, escapingPercent: Bool) -> String {
    let hex = Array("0123456789ABCDEF".utf8)
    var out: [UInt8] = []
    out.reserveCapacity(text.utf8.count)
    for byte in text.utf8 {
      if byte < 0x21 || byte >= 0x7F || (escapingPercent && byte == 0x25) {
        out += [0x25, hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]]
      } else {
        out.append(byte)
      }
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// The identity plus what else decides the response: a digest of the request headers' values
  /// (for URLs with ``headers``). Cache keys and shared in-flight work use it, so two requests that
  /// differ in `Authorization` (or any header) never share a value; the values never appear in it.
  ///
  /// ```swift
  /// ImageSource("https://a.example/x.jpg", headers: ["Authorization": "Bearer 1"]).requestIdentity
  /// // "https://a.example/x.jpg headers:5c1f…"
  /// ```
  public var requestIdentity: String {
    guard !headers.isEmpty, case .url = location else { return identity }
    return identity + " headers:" + RequestDigest.headers(headers)
  }

  /// `path` made absolute against the working directory, with `.` and repeated slashes removed.
  /// `..` stays: `link/..` is the parent of the link's target, not the folder holding the link,
  /// so removing it by text could name another file. `~` is a name like any other, as it is to
  /// the fetch.
  package static func absolute(_ path: String) -> String {
    if isCleanAbsolute(path) { return path }
    let full = path.utf8.first == UInt8(ascii: "/") ? path : FileManager.default.currentDirectoryPath + "/" + path
    // Split on `/` bytes, as the file system and ``name`` do (a slash before a combining mark is
    // one character, but still a separator).
    let components = full.utf8.split(separator: UInt8(ascii: "/")).filter { !$0.elementsEqual([UInt8(ascii: ".")]) }
    return "/" + components.map { String(Substring($0)) }.joined(separator: "/")
  }

  /// Whether `path` is already what ``absolute(_:)`` makes of it: starting with `/`, with no
  /// empty or `.` component. Paths from a folder walk are, and skip the split and join (a run
  /// asks once per image).
  static func isCleanAbsolute(_ path: String) -> Bool {
    var utf8 = path.utf8.makeIterator()
    guard utf8.next() == UInt8(ascii: "/") else { return false }
    var length = 0  // of the component read so far
    var onlyDot = false
    var sawComponent = false
    while let byte = utf8.next() {
      if byte == UInt8(ascii: "/") {
        guard length > 0, !(length == 1 && onlyDot) else { return false }
        length = 0
      } else {
        onlyDot = length == 0 && byte == UInt8(ascii: ".")
        length += 1
        sawComponent = true
      }
    }
    // "/" alone is clean; otherwise the last component must be a real one.
    return !sawComponent || (length > 0 && !(length == 1 && onlyDot))
  }

  /// The source with a local file's path resolved by the file system (`realpath(3)`: symlinks and
  /// `..` resolved), as cache stores record it; other sources as they are, and a file that cannot
  /// be resolved as it is. This reads the file system: call it off the cooperative pool.
  ///
  /// ```swift
  /// try await resources.purge(source: ImageSource("./photos/../a.jpg"))   // resolves it
  /// ```
  public var resolved: ImageSource {
    guard case .file(let path) = location, let real = FileTransport.realPath(path) else { return self }
    var copy = self
    copy.location = .file(path: real)
    return copy
  }

  /// The name outputs get instead of the base name (see ``name``).
  private var outputName: String?

  /// The base name without extension, used for output file names (`{name}`): characters other
  /// than letters, digits, `-`, `_` and `.` become `_`. Setting it names the outputs otherwise
  /// (the runner does, to tell apart inputs whose names would collide); what is set is cleaned the
  /// same way.
  public var name: String {
    get { outputName ?? baseName }
    set { outputName = ImageSource.cleaned(newValue) }
  }

  private var baseName: String {
    let last: String
    switch location {
    case .file(let path): return ImageSource.cleaned(PathText.stem(path))  // never NSString: see PathText
    case .malformed: last = "image"
    case .url(let url): last = url.lastPathComponent.isEmpty ? (url.host ?? "image") : url.lastPathComponent
    }
    // The decoded segment may hold slashes (`users%2F42%2Favatar.jpg`): they stay in the name.
    return ImageSource.cleaned(PathText.deletingExtension(last))
  }

  /// `stem` with characters other than letters, digits, `-`, `_` and `.` as `_` (`image` when empty).
  static func cleaned(_ stem: String) -> String {
    // ASCII but CR (CR LF is one character) is one character per byte, and its letters and
    // digits are the ASCII characters `isLetter` and `isNumber` take.
    if stem.utf8.allSatisfy({ $0 < 0x80 && $0 != 0x0D }) {
      guard !stem.isEmpty else { return "image" }
      return stem.utf8.allSatisfy(isKeptASCII)
        ? stem : String(decoding: stem.utf8.map { isKeptASCII($0) ? $0 : UInt8(ascii: "_") }, as: UTF8.self)
    }
    let cleaned = stem.map { $0.isLetter || $0.isNumber || "-_.".contains($0) ? $0 : "_" }
    return cleaned.isEmpty ? "image" : String(cleaned)
  }

  private static func isKeptASCII(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
      UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
      true
    default: false
    }
  }

  /// Malformed URL text with anything between `://` and `@` hidden (credentials).
  static func redacted(_ text: String) -> String {
    guard let start = text.range(of: "://"), let at = text[start.upperBound...].firstIndex(of: "@") else { return text }
    return String(text[..<start.upperBound]) + "***" + String(text[at...])
  }
}
