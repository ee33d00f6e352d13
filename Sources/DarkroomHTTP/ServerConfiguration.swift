import DarkroomCore
import Foundation

/// The settings of an ``ImageServer`` (and of `darkroom serve`): where it listens, which sources
/// it may read, how it signs, caches, limits and answers.
///
/// A configuration file is a JSON object of these settings, checked like a pipeline file: an
/// unknown or mistyped setting is an error naming its JSON path, with a suggestion. Every setting
/// has a default (``specs`` lists them; `darkroom serve --help` prints them), and command-line
/// flags override the file.
///
/// ```swift
/// var configuration = try ServerConfiguration.load(json: #"{"origin": "https://images.example.com", "key": "secret"}"#)
/// configuration.concurrency = 4
/// let server = try ImageServer(configuration: configuration)
/// ```
public struct ServerConfiguration: Sendable, Codable, Equatable {
  /// Where the server listens, `HOST:PORT` (port 0: any free port).
  public var bind: String
  /// The secret thumbor URLs are signed with (HMAC-SHA1) and preset URLs (HMAC-SHA256).
  public var key: String?
  /// Whether `/unsafe/…` URLs are served (thumbor's `ALLOW_UNSAFE_URL`).
  public var allowUnsafe: Bool
  /// Hosts an absolute image URL may name (`images.example.com`, or `*.example.com` for its
  /// subdomains). Without these, an origin or a root, no URL is fetched.
  public var allowHosts: [String]
  /// Hosts and CIDR ranges the SSRF guard lets through although they are not public (an origin on
  /// a private network, a loopback origin in tests).
  public var privateHosts: [String]
  /// The base URL that image paths are resolved against (`https://images.example.com/media/`).
  public var origin: String?
  /// A local folder that image paths are read from, beneath it only (when there is no origin).
  public var root: String?
  /// The folder of preset pipeline files (`/p/{name}/…` URLs).
  public var presets: String?
  /// A folder for the result cache's disk level; memory only without it.
  public var cacheDir: String?
  /// Whether results are cached at all (memory, then disk).
  public var resultCache: Bool
  /// The memory level's size, in bytes of encoded images.
  public var resultCacheBytes: Int
  /// The disk level's size, in bytes.
  public var diskCacheBytes: Int
  /// `Cache-Control: max-age` in seconds (a shorter freshness of the source wins).
  public var maxAge: Int
  /// The formats `auto` tries, in order, before JPEG (or PNG for alpha): `avif`, `webp`.
  public var formats: [String]
  /// The quality of lossy output when the URL names none.
  public var quality: Int
  /// Renders at once.
  public var concurrency: Int
  /// Renders waiting for a slot; beyond, requests are answered 429.
  public var queue: Int
  /// Seconds a render may take (the libvips work is stopped at the limit).
  public var timeout: Double
  /// The largest source accepted, in bytes.
  public var maxSourceBytes: Int
  /// The most pixels a source may have.
  public var maxPixels: Int
  /// The most pixels an answer may have (a URL asks for its size, and upscales by default).
  public var maxOutputPixels: Int
  /// Seconds a connection may stay idle, or take to send a request's head, before it is closed.
  public var idleTimeout: Double
  /// An image (a local file) served at the requested size when a request fails.
  public var fallbackImage: String?
  /// The status the fallback image is served with (default: the failure's own).
  public var fallbackStatus: Int?
  /// Seconds in-flight requests get to finish on shutdown.
  public var shutdownGrace: Double
  /// The `Retry-After` seconds of a 429.
  public var retryAfter: Int

  /// Every setting, its type, range and default (`darkroom serve --help` prints them).
  public static let specs: [OptionSpec] = [
    OptionSpec("bind", .string, default: "127.0.0.1:8080", "Where to listen, HOST:PORT (port 0: any free port)."),
    OptionSpec("key", .string, "The secret URLs are signed with (thumbor URLs: HMAC-SHA1; presets: HMAC-SHA256)."),
    OptionSpec("allowUnsafe", .boolean, default: false, "Serve /unsafe/… URLs, which carry no signature."),
    OptionSpec(
      "allowHosts", .stringList, default: .array([]),
      "Hosts an absolute image URL may name (\"images.example.com\", \"*.example.com\")."),
    OptionSpec(
      "privateHosts", .stringList, default: .array([]),
      "Hosts and CIDR ranges the SSRF guard lets through although they are not public (\"10.0.0.0/8\")."),
    OptionSpec("origin", .string, "The base URL image paths are resolved against (\"https://images.example.com/\")."),
    OptionSpec("root", .string, "A local folder image paths are read from (beneath it only), when there is no origin."),
    OptionSpec("presets", .string, "The folder of preset pipeline files (/p/NAME/… URLs); reloaded when they change."),
    OptionSpec("cacheDir", .string, "A folder for the result cache's disk level (memory only without it)."),
    OptionSpec("resultCache", .boolean, default: true, "Cache results (memory, then disk)."),
    OptionSpec(
      "resultCacheBytes", .integer(min: 0, max: 1 << 40), default: .number(268_435_456, text: "268435456"),
      "The memory level's size in bytes."),
    OptionSpec(
      "diskCacheBytes", .integer(min: 1 << 20, max: 1 << 50), default: .number(1_073_741_824, text: "1073741824"),
      "The disk level's size in bytes."),
    OptionSpec(
      "maxAge", .integer(min: 0, max: 315_360_000), default: .number(86_400, text: "86400"),
      "Cache-Control max-age in seconds (a shorter freshness of the source wins)."),
    OptionSpec(
      "formats", .stringList, default: .array([.string("avif"), .string("webp")]),
      "The formats format auto tries in order when Accept names them, before JPEG (PNG for alpha)."),
    OptionSpec("quality", .integer(min: 1, max: 100), default: .number(80, text: "80"), "Lossy quality when the URL names none."),
    OptionSpec(
      "concurrency", .integer(min: 1, max: 1024), default: .number(Double(defaultConcurrency), text: "\(defaultConcurrency)"),
      "Renders at once (default: one per core)."),
    OptionSpec(
      "queue", .integer(min: 0, max: 100_000), default: .number(64, text: "64"),
      "Renders waiting for a slot; beyond, the answer is 429 with Retry-After."),
    OptionSpec("timeout", .number(min: 0.001, max: 3600), default: .number(30, text: "30"), "Seconds a render may take."),
    OptionSpec(
      "maxSourceBytes", .integer(min: 1, max: 1 << 40), default: .number(50_000_000, text: "50000000"),
      "The largest source accepted, in bytes."),
    OptionSpec(
      "maxPixels", .integer(min: 1, max: 1 << 40), default: .number(100_000_000, text: "100000000"),
      "The most pixels a source may have."),
    OptionSpec(
      "maxOutputPixels", .integer(min: 1, max: 1 << 40), default: .number(40_000_000, text: "40000000"),
      "The most pixels an answer may have; a bigger size is refused (400) before anything is fetched."),
    OptionSpec(
      "idleTimeout", .number(min: 0.1, max: 3600), default: .number(15, text: "15"),
      "Seconds a connection may stay idle (or take to send a request's head) before it is closed."),
    OptionSpec("fallbackImage", .string, "A local image served, at the requested size, when a request fails."),
    OptionSpec("fallbackStatus", .integer(min: 200, max: 599), "The fallback's status (default: the failure's own)."),
    OptionSpec(
      "shutdownGrace", .number(min: 0, max: 3600), default: .number(10, text: "10"),
      "Seconds in-flight requests get to finish on SIGTERM."),
    OptionSpec("retryAfter", .integer(min: 0, max: 86_400), default: .number(1, text: "1"), "The Retry-After seconds of a 429."),
  ]

  /// One render per core.
  public static let defaultConcurrency = max(1, ProcessInfo.processInfo.activeProcessorCount)

  /// The defaults of every setting.
  public init() {
    // The specs' defaults, decoded: one list of defaults, not two.
    self = (try? Self.load(json: "{}")) ?? Self(unchecked: ())
  }

  private init(unchecked: Void) {
    bind = "127.0.0.1:8080"
    allowUnsafe = false
    allowHosts = []
    privateHosts = []
    resultCache = true
    resultCacheBytes = 268_435_456
    diskCacheBytes = 1_073_741_824
    maxAge = 86_400
    formats = ["avif", "webp"]
    quality = 80
    concurrency = Self.defaultConcurrency
    queue = 64
    timeout = 30
    maxSourceBytes = 50_000_000
    maxPixels = 100_000_000
    maxOutputPixels = 40_000_000
    idleTimeout = 15
    shutdownGrace = 10
    retryAfter = 1
  }

  /// Reads a configuration file (at most 1 MiB of UTF-8 JSON). Errors name the file and each
  /// problem's JSON path.
  public static func load(contentsOf path: String) throws(PipelineError) -> ServerConfiguration {
    let (text, _) = try PipelineDefinition.readDefinition(path)
    do {
      return try load(json: text)
    } catch {
      var located = error
      located.message = "\(path): \(error.message)"
      throw located
    }
  }

  /// Reads a configuration from JSON text.
  public static func load(json: String) throws(PipelineError) -> ServerConfiguration {
    try OptionDocument.decode(Settings.self, json: json, owner: "the server configuration").configuration
  }

  /// Checks the settings as a whole (the file's and the flags'): throws `invalidDefinition`
  /// listing every problem. Reading a file checks each setting; this also checks that a URL can
  /// be served at all (a key, or unsafe URLs allowed).
  public func validate() throws(PipelineError) {
    var problems = Settings(self).problems()
    // Checked on the whole (a file may leave the key to a flag), not when a file is read.
    if key == nil, !allowUnsafe {
      problems.append(
        OptionProblem(
          option: "key", "no URL could be served: give a key to sign URLs with (--key), or allow unsafe URLs (--allow-unsafe)"))
    }
    guard !problems.isEmpty else { return }
    throw PipelineDefinition.combined(
      problems.map { .init(code: .invalidDefinition, path: $0.option ?? "", message: $0.message) })
  }

  /// The host and port of ``bind``.
  public var address: (host: String, port: Int)? {
    guard let colon = bind.lastIndex(of: ":") else { return nil }
    var host = String(bind[..<colon])
    if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    guard !host.isEmpty, let port = Int(bind[bind.index(after: colon)...]), (0...65_535).contains(port) else { return nil }
    return (host, port)
  }
}

extension ServerConfiguration {
  /// The JSON form, whose cross-setting checks are ``problems()``.
  struct Settings: StageOptions {
    var configuration: ServerConfiguration

    init(_ configuration: ServerConfiguration) { self.configuration = configuration }
    init(from decoder: any Decoder) throws { configuration = try ServerConfiguration(from: decoder) }
    func encode(to encoder: any Encoder) throws { try configuration.encode(to: encoder) }

    static var specs: [OptionSpec] { ServerConfiguration.specs }

    func problems() -> [OptionProblem] {
      let settings = configuration
      var problems: [OptionProblem] = []
      if settings.address == nil {
        problems.append(OptionProblem(option: "bind", "expected HOST:PORT with a port from 0 to 65535, got \"\(settings.bind)\""))
      }
      let known = ["avif", "webp", "jpeg", "png", "gif"]
      for (index, format) in settings.formats.enumerated() where !known.contains(format) {
        problems.append(
          OptionProblem(option: "formats[\(index)]", "unknown format \"\(format)\"; known: " + known.joined(separator: ", ")))
      }
      if let origin = settings.origin {
        let url = URL(string: origin)
        if url?.host == nil || !["http", "https"].contains(url?.scheme?.lowercased() ?? "") {
          problems.append(OptionProblem(option: "origin", "expected an http or https URL like \"https://images.example.com/\""))
        }
      }
      for (index, host) in settings.allowHosts.enumerated() where !SourcePolicy.isHostPattern(host) {
        problems.append(
          OptionProblem(
            option: "allowHosts[\(index)]", "\"\(host)\" is not a host name like \"images.example.com\" or \"*.example.com\""))
      }
      for (index, host) in settings.privateHosts.enumerated() where host.contains("/") && AddressRange(host) == nil {
        problems.append(OptionProblem(option: "privateHosts[\(index)]", "\"\(host)\" is not a CIDR range like \"10.0.0.0/8\""))
      }
      for (name, folder) in [("root", settings.root), ("presets", settings.presets), ("cacheDir", settings.cacheDir)] {
        if let folder, folder.isEmpty { problems.append(OptionProblem(option: name, "give a folder, not an empty string")) }
      }
      if let key = settings.key, key.isEmpty { problems.append(OptionProblem(option: "key", "the key is empty")) }
      return problems
    }
  }
}

extension ServerConfiguration {
  /// ``formats`` as image formats, for ``FormatNegotiation``.
  public var preferredFormats: [ImageFormat] {
    formats.compactMap { ["avif": .avif, "webp": .webp, "jpeg": .jpeg, "png": .png, "gif": .gif][$0] }
  }
}
