import Darkroom
import Foundation

/// Where an image URL's `IMAGE` part may lead: the allowed hosts, the origin, or the local root,
/// and nothing else.
///
/// - An absolute `http(s)://` URL (percent-encoded in the path, as thumbor's clients write it) is
///   fetched when it is beneath the origin (its scheme, host, port and path) or its host is
///   allowed (``ServerConfiguration/allowHosts``, on the scheme's default port unless the entry
///   names one: `images.example.com:8080`).
/// - `host/path` is `http://host/path`, as thumbor assumes, when its first segment is an allowed
///   host; otherwise, with an origin or a root, it is a path beneath them.
/// - A path beneath the origin or the root may not hold `..` segments.
///
/// Other schemes (`file:`, `data:`) are refused. A URL that passes still goes through the fetch
/// stage's SSRF guard: private and loopback addresses are refused unless
/// ``ServerConfiguration/privateHosts`` names them, and redirects are not followed (they could
/// lead to a host that is not allowed).
///
/// ```swift
/// var configuration = ServerConfiguration()
/// configuration.origin = "https://images.example.com/media/"
/// let policy = SourcePolicy(configuration)
/// try policy.source(for: "cats/1.jpg")   // https://images.example.com/media/cats/1.jpg
/// try policy.source(for: "evil.example.org/x.jpg")   // forbiddenDestination
/// ```
public struct SourcePolicy: Sendable {
  private let allowHosts: [String]
  private let origin: URL?
  private let root: String?

  public init(_ configuration: ServerConfiguration) {
    allowHosts = configuration.allowHosts.map { $0.lowercased() }
    origin = configuration.origin.flatMap { URL(string: $0.hasSuffix("/") ? $0 : $0 + "/") }
    root = configuration.root
  }

  /// Whether `pattern` is a host name, or `*.` and a host name, with an optional `:port`.
  static func isHostPattern(_ pattern: String) -> Bool {
    let host = pattern.hasPrefix("*.") ? String(pattern.dropFirst(2)) : pattern
    return !host.isEmpty && host.count <= 253
      && host.unicodeScalars.allSatisfy { CharacterSet.alphanumerics.contains($0) || "-.:[]".unicodeScalars.contains($0) }
  }

  /// Whether an absolute URL may be fetched: it is beneath the origin (same scheme, host and
  /// port, and within its path), or its host is an allowed host on the port the pattern names
  /// (the scheme's default port when it names none).
  public func allows(_ url: URL) -> Bool {
    guard let scheme = url.scheme?.lowercased(), ["http", "https"].contains(scheme), let host = url.host?.lowercased(),
      !url.path.split(separator: "/").contains(where: { $0 == "." || $0 == ".." })
    else {
      // A `..` would lead out of the origin's path once the client library removes it.
      return false
    }
    let port = url.port ?? (scheme == "https" ? 443 : 80)
    if let origin, let originHost = origin.host?.lowercased(), originHost == host,
      origin.scheme?.lowercased() == scheme, (origin.port ?? (scheme == "https" ? 443 : 80)) == port,
      url.path.hasPrefix(origin.path.hasSuffix("/") ? origin.path : origin.path + "/") || url.path == origin.path
    {
      return true
    }
    return allowHosts.contains { entry in
      var (pattern, patternPort) = Self.splitPort(entry)
      guard (patternPort ?? (scheme == "https" ? 443 : 80)) == port else { return false }
      // `[::1]` names the host `::1`, as `URL.host` gives it.
      if pattern.hasPrefix("["), pattern.hasSuffix("]") { pattern = String(pattern.dropFirst().dropLast()) }
      return pattern.hasPrefix("*.") ? host.hasSuffix(pattern.dropFirst(1)) && host.count > pattern.count - 1 : host == pattern
    }
  }

  /// `host:port` → host and port (`[v6]:port` included); a pattern without a port → nil.
  static func splitPort(_ entry: String) -> (String, Int?) {
    guard let colon = entry.lastIndex(of: ":"), !entry.hasSuffix("]"), let port = Int(entry[entry.index(after: colon)...]),
      entry.filter({ $0 == ":" }).count == 1 || entry.hasPrefix("[")
    else { return (entry, nil) }
    return (String(entry[..<colon]), port)
  }

  /// The source for a URL's `IMAGE` part (already percent-decoded). Throws `forbiddenDestination`
  /// for a host or scheme that is not allowed, `invalidInput` for a path that leaves its base.
  public func source(for image: String) throws(PipelineError) -> ImageSource {
    let lowered = image.lowercased()
    if lowered.hasPrefix("http://") || lowered.hasPrefix("https://") {
      return try absolute(image)
    }
    let schemeEnd = lowered.range(of: "://").map { lowered[..<$0.lowerBound] }
    if schemeEnd.map({ !$0.contains("/") }) == true || lowered.hasPrefix("data:") || lowered.hasPrefix("file:") {
      throw PipelineError(.forbiddenDestination, "the image URL's scheme is not allowed (only http and https are)")
    }
    let firstSegment = image.split(separator: "/", maxSplits: 1).first.map(String.init) ?? ""
    let hostPart = firstSegment.split(separator: ":").first.map(String.init) ?? ""
    if hostPart.contains("."), let url = URL(string: "http://" + image) ?? URL(string: Self.escaped("http://" + image)),
      allows(url)
    {
      return try absolute("http://" + image)
    }
    if let origin {
      let path = try relativeSegments(image).map(Self.escaped).joined(separator: "/")
      // `./` keeps a first segment such as `http:` a path (not a URL of its own, `http:/other-host/…`),
      // and the joined URL is checked like any other.
      guard let url = URL(string: "./" + path, relativeTo: origin)?.absoluteURL, allows(url) else {
        throw PipelineError(.forbiddenDestination, "the image path leads out of the origin: \(image)")
      }
      return ImageSource(url: url)
    }
    if let root {
      return ImageSource(path: root + "/" + (try relativeSegments(image)).joined(separator: "/"))
    }
    if hostPart.contains(".") {
      throw PipelineError(.forbiddenDestination, "the image's host is not allowed: \(hostPart)")
    }
    throw PipelineError(.forbiddenDestination, "no origin or root is set up, and the image is not an allowed URL: \(image)")
  }

  private func absolute(_ text: String) throws(PipelineError) -> ImageSource {
    guard let url = URL(string: text) ?? URL(string: Self.escaped(text)), let host = url.host, !host.isEmpty else {
      throw PipelineError(.invalidInput, "the image URL is not valid: \(text)")
    }
    guard url.user == nil, url.password == nil else {
      throw PipelineError(.forbiddenDestination, "an image URL may not carry a user name or password")
    }
    guard allows(url) else { throw PipelineError(.forbiddenDestination, "the image's URL is not allowed: \(host)") }
    return ImageSource(url: url)
  }

  /// The image's path segments, none of them `.` or `..`.
  private func relativeSegments(_ image: String) throws(PipelineError) -> [String] {
    let segments = image.split(separator: "/", omittingEmptySubsequences: true)
    guard !segments.isEmpty else { throw PipelineError(.invalidInput, "the image path is empty") }
    guard !segments.contains(where: { $0 == ".." || $0 == "." }) else {
      throw PipelineError(.invalidInput, "the image path may not hold . or .. segments: \(image)")
    }
    guard !image.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) else {
      throw PipelineError(.invalidInput, "the image path holds control characters")
    }
    return segments.map(String.init)
  }

  /// `text` with every character outside a URL path's unreserved set percent-encoded.
  static func escaped(_ text: String) -> String {
    var allowed = CharacterSet.urlPathAllowed
    allowed.remove(charactersIn: "?#;")
    return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
  }
}
