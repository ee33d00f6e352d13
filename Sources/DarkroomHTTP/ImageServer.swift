import Darkroom
import Foundation
import Logging
import Synchronization

/// An image server: thumbor URLs and presets in, images out, with a result cache, one render for
/// identical concurrent requests, admission control and time limits that stop the work.
///
/// ``respond(to:)`` answers one request without any HTTP framework; ``addRoutes(to:)`` mounts
/// it (with `/healthz`, `/readyz` and `/metrics`) on a Hummingbird router, which is what
/// `darkroom serve` runs. Docs/Server.md describes the URLs, the headers and the error table.
///
/// ```swift
/// var configuration = ServerConfiguration()
/// configuration.origin = "https://images.example.com/"
/// configuration.key = "secret"
/// let server = try ImageServer(configuration: configuration)
/// let router = Router(context: ImageServerContext.self)
/// server.addRoutes(to: router)
/// let app = Application(router: router, server: server.serverBuilder, services: [server])
/// try await app.runService()
/// ```
public final class ImageServer: Sendable {
  public let configuration: ServerConfiguration
  public let metrics: ServerMetrics
  /// The presets, when ``ServerConfiguration/presets`` names a folder.
  public let presets: PresetLibrary?
  let logger: Logger
  let loader: ImageLoader
  let cache: ResultCache?
  let gate: AdmissionGate
  let renders = Coalescer<String, ServedImage>()
  let hitIndex = HitIndex(bytes: 16 << 20)
  let operations: ThumborOperations
  let policy: SourcePolicy
  let thumborSigner: ThumborSignature?
  let presetSigner: ThumborSignature?
  let fetcher: Fetcher
  let negotiation: FormatNegotiation
  let draining = Protected(false)
  /// Which connections have hung up (put its handler on every connection; see ``addRoutes(to:)``).
  public let connections = ConnectionWatch()
  /// Requests answered from memory by a connection's ``MemoryHitHandler`` (for tests).
  let eventLoopAnswers = Atomic<Int>(0)
  /// The result cache shared by the cluster's instances (`--shared-cache`), behind memory and disk.
  let sharedCache: (any SharedResultStore)?
  /// Until when the shared cache is skipped after it could not be reached.
  let sharedAwayUntil = Protected<ContinuousClock.Instant?>(nil)

  /// A server with `configuration` (checked with ``ServerConfiguration/validate()``); logs go
  /// to `logger`. With `sharedCache`, instances share results and render each key once in the
  /// cluster (see `SharedResultStore`).
  public init(
    configuration: ServerConfiguration, logger: Logger = Logger(label: "darkroom.serve"),
    sharedCache: (any SharedResultStore)? = nil
  ) throws(PipelineError) {
    try configuration.validate()
    self.sharedCache = sharedCache
    try Darkroom.bootstrap()
    self.configuration = configuration
    self.logger = logger
    let gate = AdmissionGate(limit: configuration.concurrency, queue: configuration.queue)
    self.gate = gate
    var listening: (@Sendable () -> Bool)?
    if let sharedCache { listening = { sharedCache.isListening } }
    metrics = ServerMetrics(queueDepth: { gate.waiting }, sharedCacheListening: listening)
    var loaderConfiguration = ImageLoader.Configuration()
    loaderConfiguration.timeout = .milliseconds(Int((configuration.timeout * 1000).rounded()))
    loaderConfiguration.networkLimit = max(8, configuration.concurrency * 2)
    loader = ImageLoader(configuration: loaderConfiguration)
    cache =
      configuration.resultCache
      ? try ResultCache(
        memoryBytes: configuration.resultCacheBytes, diskDirectory: configuration.cacheDir,
        diskBytes: configuration.diskCacheBytes) : nil
    operations = ThumborOperations(configuration: configuration)
    policy = SourcePolicy(configuration)
    thumborSigner = configuration.key.map { ThumborSignature(key: $0) }
    presetSigner = configuration.key.map { ThumborSignature(key: $0, algorithm: .sha256) }
    negotiation = FormatNegotiation(preferred: configuration.preferredFormats)
    var http = HTTPOptions()
    http.maxBytes = configuration.maxSourceBytes
    http.maxRedirects = 0
    http.allowHosts = configuration.privateHosts
    http.allowHostsSetting = "privateHosts"
    http.timeout = loaderConfiguration.timeout ?? .seconds(30)
    fetcher = Fetcher(
      maxBytes: configuration.maxSourceBytes, roots: configuration.root.map { [$0] } ?? [],
      allowedSchemes: configuration.root == nil ? ["http", "https"] : ["http", "https", "file"],
      transports: Fetcher.builtInTransports + [HTTPTransport(options: http)])
    presets = configuration.presets.map { PresetLibrary(directory: $0, allowedRoot: configuration.root, logger: logger) }
    presets?.reload()
  }

  /// Whether the server takes requests: false once it drains for shutdown.
  public var isReady: Bool { !draining.value }

  /// Stops reporting ready (`/readyz` answers 503) while in-flight requests finish.
  public func beginDraining() { draining.withLock { $0 = true } }

  /// Answers one image request. Never throws: every failure is an error response (or the
  /// fallback image), and the log line carries the detail.
  public func respond(to request: ImageRequest) async -> ImageResponse {
    let started = ContinuousClock.now
    // Read once: the request's format choice is asked by the hit index and remembered by it.
    let indexKey = cache == nil ? nil : hitIndexKey(request)
    if let indexKey, let hit = memoryAnswer(to: request, indexKey: indexKey, started: started) { return hit }
    let requestID = request.requestID ?? Self.makeRequestID()
    metrics.requestStarted()
    var response = ImageResponse(status: 500)
    var plan: RenderPlan?
    do {
      plan = try self.plan(for: request)
    } catch {
      // What is wrong with the URL is the client's own text: it is safe to say.
      response = await failure(error, request: request, plan: nil, requestID: requestID, detail: error.message)
    }
    if let plan {
      do {
        response = try await answer(request, plan: plan, indexKey: indexKey, requestID: requestID)
      } catch {
        response = await failure(PipelineError.from(error), request: request, plan: plan, requestID: requestID)
      }
    }
    return finished(response, request: request, requestID: requestID, started: started)
  }

  /// The answer to a request made before, from memory alone and at once (no URL reading, no
  /// task, no disk), with its metrics and access-log line; `nil` when it takes the full way.
  /// The connection handler of ``serverBuilder`` answers hits with it before Hummingbird's
  /// request task is involved.
  func memoryAnswer(to request: ImageRequest, started: ContinuousClock.Instant = .now) -> ImageResponse? {
    guard cache != nil else { return nil }
    return memoryAnswer(to: request, indexKey: hitIndexKey(request), started: started)
  }

  private func memoryAnswer(to request: ImageRequest, indexKey: String, started: ContinuousClock.Instant) -> ImageResponse? {
    guard let hit = quickHit(request, indexKey: indexKey) else { return nil }
    metrics.requestStarted()
    return finished(hit, request: request, requestID: request.requestID ?? Self.makeRequestID(), started: started)
  }

  /// Adds the request id, ends the request's metrics and writes its access-log line.
  private func finished(
    _ response: ImageResponse, request: ImageRequest, requestID: String, started: ContinuousClock.Instant
  ) -> ImageResponse {
    var response = response
    response.headers.append(("X-Request-Id", requestID))
    let elapsed = ContinuousClock.now - started
    metrics.requestEnded(status: response.status, bytes: request.isHead ? 0 : response.bodyLength, duration: elapsed)
    logger.info(
      "request",
      metadata: [
        "request": "\(requestID)", "method": "\(request.isHead ? "HEAD" : "GET")", "path": "\(Self.redacted(request.path))",
        "status": "\(response.status)", "bytes": "\(response.bodyLength)",
        "ms": "\(Int(elapsed.components.seconds * 1000 + elapsed.components.attoseconds / 1_000_000_000_000_000))",
      ])
    return response
  }

  /// The path with its signature replaced by `…` (access logs must not replay signed URLs).
  package static func redacted(_ path: String) -> String {
    let parts = path.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2, let rest = parts.last else { return String(path.prefix(2048)) }
    let segments = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    guard let first = segments.first, first != "unsafe", segments.count == 2 else { return String(path.prefix(2048)) }
    return String(("/…/" + segments[1]).prefix(2048))
  }

  static func makeRequestID() -> String { String(UUID().uuidString.prefix(13)).lowercased() }
}
