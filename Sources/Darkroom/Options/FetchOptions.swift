import Foundation

/// JSON options of the `fetch` stage.
package struct FetchOptions: StageOptions {
  public var maxBytes: Int
  public var root: String?
  public var timeout: Double
  public var connectTimeout: Double
  public var lowSpeedLimit: Int
  public var lowSpeedTime: Double
  public var maxRedirects: Int
  public var headers: [String: String]?
  public var userAgent: String?
  public var accept: [String]?
  public var retries: Int
  public var allowHosts: [String]?
  public var allowSchemes: [String]?
  public var caFile: String?
  public var caPath: String?

  static let schemes = ["file", "http", "https", "data"]

  public static let specs = [
    OptionSpec(
      "maxBytes", .integer(min: 1), default: 50_000_000,
      "The largest source accepted, in bytes; bigger sources fail with tooLarge (HTTP: from Content-Length, or as soon as more arrives)."
    ),
    OptionSpec(
      "root", .string,
      "Local sources must resolve (symlinks included) to a path inside this directory (and inside the runner's --root, if given)."
    ),
    OptionSpec("timeout", .number(min: 0.001, max: 3600), default: 60, "HTTP: seconds the whole transfer may take."),
    OptionSpec(
      "connectTimeout", .number(min: 0.001, max: 600), default: 10, "HTTP: seconds connecting (DNS, TCP, TLS) may take."),
    OptionSpec(
      "lowSpeedLimit", .integer(min: 0), default: 1024, "HTTP: bytes per second below which a transfer counts as stalled."),
    OptionSpec("lowSpeedTime", .number(min: 1, max: 3600), default: 20, "HTTP: seconds a transfer may stay below lowSpeedLimit."),
    OptionSpec("maxRedirects", .integer(min: 0, max: 50), default: 5, "HTTP: the most redirects followed."),
    OptionSpec("headers", .stringMap, "HTTP: extra request headers, e.g. {\"Referer\": \"https://example.com\"}."),
    OptionSpec("userAgent", .string, "HTTP: the User-Agent header (default \"Darkroom/1 (libcurl)\")."),
    OptionSpec("accept", .stringList, "HTTP: content types the response must have, e.g. [\"image/*\"]; default: any."),
    OptionSpec(
      "retries", .integer(min: 0, max: 10), default: 2,
      "HTTP: retries for connection errors, timeouts, 5xx and 429 (exponential backoff with jitter; Retry-After honoured)."),
    OptionSpec(
      "allowHosts", .stringList,
      "HTTP: hosts and CIDR ranges the SSRF guard lets through although they are not public, e.g. [\"127.0.0.1\"]."),
    OptionSpec("allowSchemes", .stringList, "The schemes this pipeline may fetch: file, http, https, data; default: all."),
    OptionSpec(
      "caFile", .string,
      "HTTPS: a PEM file of CA certificates (at most 1 MB) trusted instead of the system's store; read when the pipeline loads, confined like local sources."
    ),
    OptionSpec(
      "caPath", .string,
      "HTTPS: an OpenSSL hashed directory (<hash>.0 names) whose certificates are trusted instead of the system's store; read when the pipeline loads."
    ),
  ]

  /// The longest `caFile` or `caPath`, in bytes (Linux's PATH_MAX).
  static let maxPathBytes = 4096

  public func problems() -> [OptionProblem] {
    var problems: [OptionProblem] = []
    for (index, scheme) in (allowSchemes ?? []).enumerated() where !FetchOptions.schemes.contains(scheme) {
      problems.append(
        OptionProblem(
          option: "allowSchemes[\(index)]", "unknown scheme \"\(scheme)\"; known: " + FetchOptions.schemes.joined(separator: ", ")
        ))
    }
    for (name, value) in (headers ?? [:]).sorted(by: { $0.key < $1.key }) {
      if let problem = HTTPHeaderField.problem(name: name, value: value) {
        problems.append(OptionProblem(option: "headers.\(name)", problem))
      }
    }
    for (index, host) in (allowHosts ?? []).enumerated() where host.contains("/") && AddressRange(host) == nil {
      problems.append(OptionProblem(option: "allowHosts[\(index)]", "\"\(host)\" is not a valid CIDR range like \"10.0.0.0/8\""))
    }
    for (name, path) in [("caFile", caFile), ("caPath", caPath)] {
      guard let path else { continue }
      if path.isEmpty || path.utf8.count > Self.maxPathBytes || path.contains("\0") {
        problems.append(OptionProblem(option: name, "give a path of 1 to \(Self.maxPathBytes) bytes without NUL characters"))
      }
    }
    return problems
  }

  /// The HTTP transport settings these options describe, with the certificate authorities of
  /// `caFile` and `caPath` read beneath `roots` (the stage's `root` and the runner's `--root`),
  /// unless `readingCertificates` is false (a pipeline checked for other machines).
  public func httpOptions(roots: [String], readingCertificates: Bool = true) throws -> HTTPOptions {
    var options = HTTPOptions()
    options.maxBytes = maxBytes
    options.timeout = .milliseconds(Int(timeout * 1000))
    options.connectTimeout = .milliseconds(Int(connectTimeout * 1000))
    options.lowSpeedLimit = lowSpeedLimit
    options.lowSpeedTime = .milliseconds(Int(lowSpeedTime * 1000))
    options.maxRedirects = maxRedirects
    options.headers = headers ?? [:]
    if let userAgent { options.userAgent = userAgent }
    options.acceptedContentTypes = accept ?? []
    options.retries = retries
    options.allowHosts = allowHosts ?? []
    if readingCertificates { options.trustedCertificates = try trustedCertificates(roots: roots) }
    return options
  }
}

extension FetchOptions {
  /// The authorities of `caFile` and `caPath` together; `nil` when neither is given.
  func trustedCertificates(roots: [String]) throws -> TrustedCertificates? {
    let file = try caFile.map { try TrustedCertificates.file($0, roots: roots) }
    let directory = try caPath.map { try TrustedCertificates.directory($0, roots: roots) }
    guard let file, let directory else { return file ?? directory }
    return try file.adding(directory)
  }
}
