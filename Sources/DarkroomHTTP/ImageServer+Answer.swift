import Darkroom
import Foundation

/// What one request renders: the source, the stages after the fetch, and how it was asked for.
struct RenderPlan: Sendable {
  var source: ImageSource
  var stages: [AnyStage]
  var variesOnAccept: Bool
  /// A preset's own fallback image, else the server's.
  var fallbackImage: String?
  /// Whether the plan is a pure function of the path and the chosen format (a thumbor URL),
  /// which the hit index may remember.
  var indexable = false
}

extension PipelineError {
  /// Any error as a `PipelineError` (a task's cancellation is `cancelled`).
  static func from(_ error: any Error) -> PipelineError {
    if let error = error as? PipelineError { return error }
    if error is CancellationError { return PipelineError(.cancelled, "the client went away") }
    return PipelineError(.stageFailed, "unexpected error: \(error)")
  }
}

extension ImageServer {
  /// Reads the URL: a preset (`/{signature}/p/{name}/{IMAGE}`) or a thumbor URL, its signature
  /// checked before anything else is done.
  func plan(for request: ImageRequest) throws(PipelineError) -> RenderPlan {
    let segments = request.path.split(separator: "/", maxSplits: 3, omittingEmptySubsequences: false)
    if segments.count == 4, segments[0].isEmpty, segments[2] == "p", presets != nil {
      return try presetPlan(signature: String(segments[1]), rest: String(segments[3]), request: request)
    }
    let url = try ThumborURL(path: request.path)
    try checkSignature(url.signature, path: url.signedPath, signer: thumborSigner)
    let recipe = try operations.stages(for: url, accept: request.accept)
    return RenderPlan(
      source: try policy.source(for: url.image), stages: recipe.stages, variesOnAccept: recipe.variesOnAccept,
      fallbackImage: configuration.fallbackImage, indexable: true)
  }

  private func presetPlan(signature: String, rest: String, request: ImageRequest) throws(PipelineError) -> RenderPlan {
    let parts = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
    guard parts.count == 2, let name = parts.first, PresetLibrary.isName(name), let image = parts.last, !image.isEmpty else {
      throw PipelineError(.invalidInput, "a preset URL is /{signature}/p/{preset}/{image}")
    }
    try checkSignature(signature == "unsafe" ? nil : signature, path: "p/" + rest, signer: presetSigner)
    guard let presets else { throw PipelineError(.invalidInput, "this server has no presets") }
    let preset = try presets.preset(named: String(name))
    var stages = preset.stages
    guard let decoded = String(image).removingPercentEncoding else {
      throw PipelineError(.invalidInput, "the image has a broken %-escape")
    }
    var varies = false
    // `format: "auto"` in a preset is negotiated from Accept, as with no format filter.
    if let last = stages.last, let encoder = last.base as? ImageEncoder,
      case .auto(let quality, let lossless, let effort) = encoder.format
    {
      let choice = negotiation.choose(accept: request.accept, hasAlpha: false)
      var chosen = encoder
      switch choice.format {
      case .avif: chosen.format = .avif(quality: quality ?? 50, lossless: lossless, effort: effort ?? 4)
      case .webp: chosen.format = .webp(quality: quality ?? configuration.quality, lossless: lossless, effort: effort ?? 4)
      default: chosen.format = .jpegOrPNG(quality: quality ?? configuration.quality)
      }
      chosen.format = ThumborOperations.animating(chosen.format, as: choice.animatedFormat, quality: configuration.quality)
      stages[stages.count - 1] = AnyStage(chosen)
      varies = !negotiation.preferred.isEmpty
    }
    return RenderPlan(
      source: try policy.source(for: decoded), stages: stages, variesOnAccept: varies,
      fallbackImage: preset.fallbackImage ?? configuration.fallbackImage)
  }

  private func checkSignature(_ signature: String?, path: String, signer: ThumborSignature?) throws(PipelineError) {
    guard let signature else {
      guard configuration.allowUnsafe else {
        throw PipelineError(.badSignature, "unsafe URLs are not allowed on this server (--allow-unsafe)")
      }
      return
    }
    guard let signer, signer.verify(signature, path: path) else {
      throw PipelineError(.badSignature, "the URL's signature does not match its path")
    }
  }

  /// Answers from the result cache, or renders (one render for identical requests in flight).
  /// `indexKey` is the request's hit-index key (``hitIndexKey(_:)``), when there is a result cache.
  func answer(_ request: ImageRequest, plan: RenderPlan, indexKey: String?, requestID: String) async throws -> ImageResponse {
    let identity = try await sourceIdentity(plan.source)
    let key = identity.map {
      CacheKey.make(prefix: "serve", source: $0, upstream: [fetcher.cacheIdentifier] + plan.stages.map(\.cacheIdentifier))
    }
    if let key, let cache {
      if let indexKey, plan.indexable, case .url = plan.source.location {
        hitIndex.remember(HitIndex.Entry(resultKey: key, variesOnAccept: plan.variesOnAccept), for: indexKey)
      }
      if let hit = await cache.lookup(key) {
        metrics.cacheHit()
        return ok(hit, request: request, variesOnAccept: plan.variesOnAccept)
      }
      metrics.cacheMiss()
    }
    // Only a render waits long enough to be worth cancelling when the client hangs up; a hit
    // is answered without a task of its own.
    let served =
      if let connection = request.connection {
        try await connections.run(on: connection) {
          try await self.render(plan, key: key, identity: identity, requestID: requestID)
        }
      } else {
        try await render(plan, key: key, identity: identity, requestID: requestID)
      }
    return ok(served, request: request, variesOnAccept: plan.variesOnAccept)
  }

  /// The hit index's key for `request`.
  func hitIndexKey(_ request: ImageRequest) -> String {
    HitIndex.key(path: request.path, choice: negotiation.choose(accept: request.accept, hasAlpha: false))
  }

  /// The answer from memory for a URL answered before, without reading it into stages again.
  func quickHit(_ request: ImageRequest, indexKey: String) -> ImageResponse? {
    guard let cache, let entry = hitIndex.entry(for: indexKey), let hit = cache.memoryHit(entry.resultKey) else {
      return nil
    }
    metrics.cacheHit()
    return ok(hit, request: request, variesOnAccept: entry.variesOnAccept)
  }

  /// The source's cache identity: a file's includes its version (read off the cooperative pool).
  private func sourceIdentity(_ source: ImageSource) async throws -> String? {
    guard case .file = source.location else { return source.requestIdentity }
    return try await BlockingPool.shared.run { CacheKey.identity(of: source) }
  }

  private func render(_ plan: RenderPlan, key: String?, identity: String?, requestID: String) async throws -> ServedImage {
    // The render itself; it runs once admitted (below, or in the cluster's own order).
    let body: @Sendable () async throws -> ServedImage = {
      self.metrics.renderStarted()
      let pipeline = try Pipeline<ImageSource, EncodedImage>(
        StageGraph(name: "serve", stages: [AnyStage(self.fetcher)] + plan.stages))
      let freshness = SourceFreshness()
      var options = self.loader.defaultRunOptions
      options.layers.append(SourceFreshnessLayer.Factory(freshness: freshness))
      let operation = self.loader.load(plan.source, pipeline: pipeline, options: options)
      self.logger.debug("render", metadata: ["request": "\(requestID)", "operation": "\(operation.id)"])
      do {
        let image = try await operation.value
        let maxAge = min(self.configuration.maxAge, freshness.maxAge ?? .max)
        var served = ServedImage(image: image, expiresAt: Date() + TimeInterval(maxAge))
        // A source that is private to its client, or varies on what no key holds, is never
        // kept for other callers: only its own client may keep the answer.
        served.isPrivate = !freshness.shareable
        if let key, let identity, maxAge > 0, !served.isPrivate { await self.cache?.store(served, key: key, source: identity) }
        return served
      } catch {
        var located = PipelineError.from(error)
        located.message += " (operation \(operation.id))"
        throw located
      }
    }
    let work: @Sendable (PriorityTicket) async throws -> ServedImage = { _ in try await self.gate.admitted { try await body() } }
    guard let key else { return try await work(PriorityTicket(.normal)) }
    guard let sharedCache, configuration.resultCache else { return try await renders.value(for: key, work: work) }
    return try await renders.value(for: key) { _ in try await self.clusterRender(key: key, shared: sharedCache, render: body) }
  }

  func ok(_ served: ServedImage, request: ImageRequest, variesOnAccept: Bool) -> ImageResponse {
    var headers: [(name: String, value: String)] = [
      ("ETag", served.etag),
      ("Cache-Control", "\(served.isPrivate ? "private" : "public"), max-age=\(served.maxAge(now: Date()))"),
    ]
    if variesOnAccept { headers.append(("Vary", "Accept")) }
    if let tags = request.ifNoneMatch, Self.matches(tags, etag: served.etag) {
      return ImageResponse(status: 304, headers: headers)
    }
    headers.insert(("Content-Type", served.image.format.mimeType), at: 0)
    if request.isHead {
      headers.append(("Content-Length", String(served.image.bytes.count)))
      return ImageResponse(status: 200, headers: headers)
    }
    return ImageResponse(status: 200, headers: headers, body: served.image.bytes)
  }

  /// Whether an `If-None-Match` list names `etag` (weak comparison, `*` matches any).
  package static func matches(_ list: String, etag: String) -> Bool {
    list.utf8.count <= 8_192
      && list.split(separator: ",").prefix(64).contains { tag in
        let tag = tag.trimmingCharacters(in: .whitespaces)
        return tag == "*" || CacheValidators.sameETag(tag, etag)
      }
  }

  /// The error's answer, or the fallback image at the requested size.
  func failure(
    _ error: PipelineError, request: ImageRequest, plan: RenderPlan?, requestID: String, detail: String? = nil
  ) async -> ImageResponse {
    let answer = ErrorStatus(error)
    metrics.failed(error.code)
    logger.warning(
      "request failed",
      metadata: [
        "request": "\(requestID)", "path": "\(Self.redacted(request.path))", "status": "\(answer.status)",
        "code": "\(error.code.rawValue)", "error": "\(error.message)",
      ])
    if let plan, !plan.stages.isEmpty, let fallback = await fallback(for: error, plan: plan, requestID: requestID) {
      var response = ok(
        fallback, request: ImageRequest(path: request.path, isHead: request.isHead), variesOnAccept: plan.variesOnAccept)
      response.status = configuration.fallbackStatus ?? answer.status
      response.headers = response.headers.map { $0.name == "Cache-Control" ? ("Cache-Control", "no-store") : $0 }
      response.headers.removeAll { $0.name == "ETag" }
      return response
    }
    var headers: [(name: String, value: String)] = [("Content-Type", "text/plain; charset=utf-8"), ("Cache-Control", "no-store")]
    if error.code == .overloaded { headers.append(("Retry-After", String(configuration.retryAfter))) }
    let shown = (detail.map { answer.message + ": " + Self.printable($0) } ?? answer.message) + "\n"
    if request.isHead { headers.append(("Content-Length", String(shown.utf8.count))) }
    return ImageResponse(status: answer.status, headers: headers, text: request.isHead ? nil : shown)
  }

  /// At most 300 printable ASCII characters of `text` (a client's URL, echoed in an error).
  static func printable(_ text: String) -> String {
    String(
      String.UnicodeScalarView(
        text.unicodeScalars.prefix(300).map { $0.isASCII && $0.value >= 0x20 && $0.value != 0x7F ? $0 : "?" }))
  }

  /// The fallback image rendered with the request's stages, for failures of the image (not of
  /// the URL, the signature, or the server's load). It takes a render slot like any render and
  /// is kept in the result cache (keyed by the file's version).
  private func fallback(for error: PipelineError, plan: RenderPlan, requestID: String) async -> ServedImage? {
    guard let image = plan.fallbackImage else { return nil }
    let excluded: Set<PipelineError.Code> = [.badSignature, .overloaded, .cancelled, .invalidInput, .forbiddenDestination]
    guard !excluded.contains(error.code) else { return nil }
    let source = ImageSource(path: image)
    do {
      let identity = try await sourceIdentity(source)
      let key = identity.map { CacheKey.make(prefix: "serve-fallback", source: $0, upstream: plan.stages.map(\.cacheIdentifier)) }
      if let key, let hit = await cache?.lookup(key) { return hit }
      let folder = PathText.folder(image)
      let fallbackFetcher = Fetcher(roots: [folder.isEmpty ? "." : folder], allowedSchemes: ["file"])
      let pipeline = try Pipeline<ImageSource, EncodedImage>(
        StageGraph(name: "fallback", stages: [AnyStage(fallbackFetcher)] + plan.stages))
      let encoded = try await gate.admitted { try await self.loader.load(source, pipeline: pipeline).value }
      let served = ServedImage(image: encoded, expiresAt: Date() + TimeInterval(configuration.maxAge))
      if let key, let identity { await cache?.store(served, key: key, source: identity) }
      return served
    } catch {
      logger.error(
        "the fallback image failed", metadata: ["request": "\(requestID)", "error": "\(PipelineError.from(error).message)"])
      return nil
    }
  }
}
