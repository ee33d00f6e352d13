import CCurl
import CCurlShim
import DarkroomCore
import Foundation

/// Fetches `http://` and `https://` sources for the `Fetcher` through libcurl.
///
/// Every transfer runs on the shared `curl_multi` loop (connection reuse, HTTP/2), bounded by
/// ``HTTPOptions``: time limits, `maxBytes` (from `Content-Length` and while receiving), redirects,
/// and the SSRF guard, which checks every address connected to — after DNS resolution and on every
/// redirect hop — and refuses non-public ones unless ``HTTPOptions/allowHosts`` opens them.
/// Connection errors, timeouts, 5xx and 429 are retried with exponential backoff and jitter
/// (`Retry-After` honoured); other 4xx are not.
///
/// ```swift
/// let fetch = Fetcher(transports: Fetcher.builtInTransports + [HTTPTransport()])
/// let data = try await fetch.process(ImageSource("https://example.com/a.jpg"), context: StageContext())
/// ```
public struct HTTPTransport: FetchTransport {
  public let schemes: Set<String> = ["http", "https"]
  public var options: HTTPOptions

  public init(options: HTTPOptions = HTTPOptions()) { self.options = options }

  public var identifier: String { options.identifier }
  /// With a digest of the header values: responses to other credentials are other entries.
  public var cacheIdentifier: String {
    options.headers.isEmpty ? identifier : identifier + "#headers:" + RequestDigest.headers(options.headers)
  }

  /// How many transfers hold a libcurl handle right now (0 when nothing is being fetched): for
  /// leak checks and diagnostics.
  public static var liveTransfers: Int { CurlTransfer.live.load(ordering: .relaxed) }

  /// Bounds how many HTTP transfers run at once in the whole process (default 64); more wait in
  /// the order they were asked.
  public static func setMaxConcurrentTransfers(_ count: Int) {
    CurlTransferLoops.shared.maxConcurrentTransfers = count
  }

  public func fetch(_ source: ImageSource, limits: FetchLimits, context: StageContext) async throws -> FetchedData {
    try await fetch(source, maxBytes: min(limits.maxBytes, options.maxBytes), progress: context.reportProgress)
  }

  /// Fetches a source, optionally as a conditional request (a cache revalidating its copy): a
  /// `304 Not Modified` answer returns data with `FetchedData.notModified` set and no bytes.
  public func fetch(
    _ source: ImageSource, ifNoneMatch etag: String? = nil, ifModifiedSince date: Date? = nil, maxBytes: Int? = nil,
    progress: (@Sendable (Int, Int?) -> Void)? = nil
  ) async throws -> FetchedData {
    guard case .url(let url) = source.location, let scheme = url.scheme?.lowercased(), schemes.contains(scheme) else {
      throw PipelineError(.invalidInput, "\(source) is not an http(s) URL", source: source.description)
    }
    try Curl.initialize()
    var conditional: [String: String] = [:]
    // A validator comes from a cache entry, a file: one that could not be a header is not sent.
    if let etag, HTTPHeaderField.problem(name: "If-None-Match", value: etag) == nil { conditional["If-None-Match"] = etag }
    if let date { conditional["If-Modified-Since"] = HTTPDate.format(date) }
    var limited = options
    limited.maxBytes = maxBytes ?? options.maxBytes
    for header in source.headers { limited.headers[header.key] = header.value }
    return try await perform(url, source: source, options: limited, conditional: conditional, upload: nil, progress: progress)
  }

  /// POSTs `body` (a webhook's JSON, say) to `url` with this transport's options: its timeout,
  /// retries with backoff on connection failures, 5xx and 429, SSRF guard and allowed hosts.
  /// Returns the response (status, headers, body).
  public func post(_ url: String, body: String, contentType: String = "application/json") async throws -> FetchedData {
    let source = ImageSource(url)
    guard case .url(let parsed) = source.location, let scheme = parsed.scheme?.lowercased(), schemes.contains(scheme) else {
      throw PipelineError(.invalidInput, "\(source) is not an http(s) URL", source: source.description)
    }
    try Curl.initialize()
    return try await perform(
      parsed, source: source, options: options, conditional: [:],
      upload: CurlTransfer.Upload(body: body, contentType: contentType), progress: nil)
  }

  private func perform(
    _ url: URL, source: ImageSource, options limited: HTTPOptions, conditional: [String: String], upload: CurlTransfer.Upload?,
    progress: (@Sendable (Int, Int?) -> Void)?
  ) async throws -> FetchedData {
    // Headers from pipeline files and from callers are sent only when they are headers.
    for (name, value) in limited.headers.sorted(by: { $0.key < $1.key }) {
      if let problem = HTTPHeaderField.problem(name: name, value: value) {
        throw PipelineError(.invalidInput, "cannot send the request for \(source): \(problem)", source: source.description)
      }
    }
    let clock = ContinuousClock()
    let deadline = clock.now + limited.timeout * (limited.retries + 1)
    var attempt = 0
    while true {
      let (result, cancelled) = try await runAttempt(
        url, source: source, options: limited, conditional: conditional, upload: upload, progress: progress)
      switch result {
      case .success(let data):
        return data
      case .failure(let error, let retryable, let retryAfter):
        if cancelled || Task.isCancelled { throw CancellationError() }
        guard retryable, attempt < limited.retries else { throw error }
        let delay = retryAfter ?? Self.backoff(attempt: attempt, base: limited.retryBaseDelay)
        guard clock.now + delay < deadline else { throw error }
        try await Task.sleep(for: delay)
        attempt += 1
      }
    }
  }

  /// One attempt: a transfer, and what it came to. The transfer and a body that is not returned
  /// (a spooled one holds a file) are gone when it returns, before a retry waits.
  private func runAttempt(
    _ url: URL, source: ImageSource, options: HTTPOptions, conditional: [String: String], upload: CurlTransfer.Upload?,
    progress: (@Sendable (Int, Int?) -> Void)?
  ) async throws -> (HTTPOutcomeClassifier.Result, cancelled: Bool) {
    let spool = upload == nil ? await Self.openSpool(in: options.spoolDirectory) : -1
    guard
      let transfer = CurlTransfer(
        url: url.absoluteString, options: options, conditional: conditional, upload: upload, spool: spool,
        progress: progress)
    else {
      throw PipelineError(.fetchFailed, "libcurl could not create a transfer", source: source.description)
    }
    let outcome = await CurlTransferLoops.shared.perform(transfer)
    return (HTTPOutcomeClassifier(options: options, source: source).classify(outcome), outcome.cancelled)
  }

  /// An unnamed file in `directory` for one attempt's body (``HTTPOptions/spoolDirectory``), made
  /// on the blocking pool: creating a file is a file-system call that can wait on the disk, and
  /// on the transfer thread it held up every other transfer (ext4's inode allocation took ~0.1 ms
  /// per file after a batch's files were deleted). -1 without a directory, or where no unnamed
  /// file can be made there (missing, another kind of file system, the spool's share of the
  /// descriptor limit in use: ``AtomicFile/openSpool(in:)``): the body then stays in memory.
  private static func openSpool(in directory: String?) async -> Int32 {
    guard let directory else { return -1 }
    return (try? await BlockingPool.shared.run { AtomicFile.openSpool(in: directory) }) ?? -1
  }

  /// Exponential backoff with jitter: a random 50–100 % of base × 2^attempt (at most 30 s).
  static func backoff(attempt: Int, base: Duration) -> Duration {
    let ceiling = min(base * (1 << min(attempt, 16)), .seconds(30))
    let fraction = Double.random(in: 0.5...1.0)
    return ceiling * fraction
  }
}

extension HTTPTransport: ConditionalFetchTransport {
  /// A conditional request with the stored `ETag` and `Last-Modified`.
  public func fetch(
    _ source: ImageSource, limits: FetchLimits, validators: CacheValidators, context: StageContext
  ) async throws -> FetchedData {
    try await fetch(
      source, ifNoneMatch: validators.etag, ifModifiedSince: validators.lastModified.flatMap(HTTPDate.parse),
      maxBytes: min(limits.maxBytes, options.maxBytes), progress: context.reportProgress)
  }
}

extension HTTPTransport: SpoolingTransport {
  /// This transport with ``HTTPOptions/spoolDirectory`` set to `directory`.
  package func spooling(into directory: String) -> HTTPTransport {
    var spooled = self
    spooled.options.spoolDirectory = directory
    return spooled
  }
}
