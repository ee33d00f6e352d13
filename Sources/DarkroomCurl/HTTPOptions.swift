import DarkroomCore

/// How the HTTP fetcher transfers: limits, headers, retries and the SSRF guard.
///
/// ```swift
/// var options = HTTPOptions()
/// options.headers["Referer"] = "https://example.com"
/// options.allowHosts = ["127.0.0.1"]        // open loopback for tests
/// let transport = HTTPTransport(options: options)
/// ```
public struct HTTPOptions: Sendable, Hashable {
  /// The longest a whole transfer may take (AsyncImageView's 60 s).
  public var timeout: Duration = .seconds(60)
  /// The longest connecting (DNS, TCP, TLS) may take.
  public var connectTimeout: Duration = .seconds(10)
  /// A transfer slower than this many bytes per second for ``lowSpeedTime`` is cut off.
  public var lowSpeedLimit: Int = 1024
  public var lowSpeedTime: Duration = .seconds(20)
  /// The most bytes accepted: refused from `Content-Length`, aborted when the body passes it.
  public var maxBytes: Int = Fetcher.defaultMaxBytes
  /// The most redirects followed; a longer chain or a loop fails with `tooManyRedirects`.
  public var maxRedirects: Int = 5
  /// Extra request headers (`Referer`, `Authorization`…).
  public var headers: [String: String] = [:]
  /// The `User-Agent` header.
  public var userAgent: String = "Darkroom/1 (libcurl)"
  /// Content types the response must have (`image/*` patterns); empty accepts any (the decoder
  /// sniffs the bytes anyway).
  public var acceptedContentTypes: [String] = []
  /// How often a failed transfer is retried: connection errors, timeouts, 5xx and 429 only.
  public var retries: Int = 2
  /// The first retry delay; each retry doubles it, and the actual wait is a random 50–100 % of it.
  public var retryBaseDelay: Duration = .milliseconds(200)
  /// Hosts and address ranges (CIDR) the SSRF guard lets through although they are not public.
  public var allowHosts: [String] = []
  /// The name of the setting that fills ``allowHosts``, named by a refusal's message ("allow it
  /// with …"): `privateHosts` for `darkroom serve`'s configuration. Changes nothing else.
  public var allowHostsSetting: String = "allowHosts"
  /// A directory where response bodies are written as they arrive, each into an unnamed file
  /// (`O_TMPFILE`), instead of into memory; `nil` keeps them in memory.
  ///
  /// For a pipeline that saves what it fetches: the fetched bytes stay in their file
  /// (``ImageBytes/streamingDescriptor``) and a `save` (``BytesWriter``) into the same file system
  /// links that file into place, so a body is never copied after libcurl received it. `darkroom
  /// run` sets it to `--output` for pipelines that only fetch. Where the directory cannot hold
  /// unnamed files (missing, another kind of file system, no descriptors left), bodies stay in
  /// memory; a write that fails there (a full disk) fails the fetch with `writeFailed`.
  ///
  /// ```swift
  /// options.spoolDirectory = "mirror"
  /// let mirror = Pipeline(name: "mirror") {
  ///   Fetcher(transports: [HTTPTransport(options: options)]); BytesWriter(directory: "mirror")
  /// }
  /// ```
  public var spoolDirectory: String?
  /// The certificate authorities HTTPS transfers trust, instead of the system's store; `nil`
  /// trusts the system's store (libcurl's default CA file and directory).
  ///
  /// ```swift
  /// options.trustedCertificates = try TrustedCertificates.file("ca.pem", roots: [])
  /// ```
  public var trustedCertificates: TrustedCertificates?

  public init() {}

  /// A stable description for stage identifiers (headers by name only).
  /// Every option that can change what is fetched or whether it is accepted is part of it; header
  /// values are left out (they may be secrets), their names are in.
  public var identifier: String {
    "http(timeout=\(timeout),connect=\(connectTimeout),lowSpeed=\(lowSpeedLimit)/\(lowSpeedTime),maxBytes=\(maxBytes),"
      + "redirects=\(maxRedirects),retries=\(retries),ua=\(userAgent),accept=\(acceptedContentTypes.joined(separator: "+")),"
      + "headers=\(headers.keys.sorted().joined(separator: "+")),allow=\(allowHosts.sorted().joined(separator: "+"))"
      + (trustedCertificates.map { ",ca=\($0.digest)" } ?? "") + ")"
  }
}

/// Decides whether an address may be connected to (the SSRF guard).
struct DestinationPolicy: Sendable {
  let allowedRanges: [AddressRange]
  let allowedNames: Set<String>

  init(options: HTTPOptions) {
    let allowHosts = options.allowHosts
    if allowHosts.isEmpty {
      self.init(allowHosts: [])
    } else if let known = Self.known.withLock({ $0[allowHosts] }) {
      self = known
    } else {
      self.init(allowHosts: allowHosts)
      Self.known.withLock { known in
        if known.count >= 64 { known.removeAll() }
        known[allowHosts] = self
      }
    }
  }

  /// Each entry of `allowHosts` is an address range (CIDR) or else a host name (lower case).
  private init(allowHosts: [String]) {
    var ranges: [AddressRange] = []
    var names = Set<String>()
    for entry in allowHosts {
      if let range = AddressRange(entry) { ranges.append(range) } else { names.insert(entry.lowercased()) }
    }
    allowedRanges = ranges
    allowedNames = names
  }

  /// Policies made so far, by their allowed hosts: every transfer needs one, and parsing its
  /// hosts as address ranges cost ~10 µs a transfer. A process has a few; past 64 the table starts
  /// afresh.
  private static let known = Protected<[[String]: DestinationPolicy]>([:])

  /// Nil when allowed; otherwise why not. `host` (the host of the URL being fetched) is read
  /// only for an address that is not public and not in an allowed range: reading it parses the
  /// URL, which every request would pay for otherwise.
  func refusal(address: [UInt8], host hostOfURL: () -> String?) -> String? {
    if allowedRanges.contains(where: { $0.contains(address) }) { return nil }
    guard let range = AddressRange.nonPublic.first(where: { $0.contains(address) }) else { return nil }
    let host = hostOfURL()
    if let host, allowedNames.contains(host.lowercased()) { return nil }
    let shown = AddressRange.format(address)
    let named = host.map { $0 == shown || $0 == "[\(shown)]" ? "" : "\($0) resolves to " } ?? ""
    return "\(named)\(shown), in the non-public range \(range)"
  }
}
