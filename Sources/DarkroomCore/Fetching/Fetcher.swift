import Foundation

/// The `fetch` stage: turns an ``ImageSource`` into its bytes.
///
/// The scheme picks the transport: local paths and `file://` URLs are read by `FileTransport`
/// (confined to ``roots`` when set, symlinks resolved first); other schemes are served by
/// `data:` URLs by `DataTransport`, and `http(s)` by DarkroomCurl's `HTTPTransport` when it is in
/// ``transports`` (the standard registry adds it). Every transport enforces
/// ``maxBytes``.
///
/// ```swift
/// let fetch = Fetcher(maxBytes: 20_000_000, root: "/srv/images")
/// let data = try await fetch.process(ImageSource("/srv/images/a.jpg"), context: StageContext())
/// ```
public struct Fetcher: Stage {
  public static let kind = "fetch"

  /// The most bytes accepted; bigger sources fail with `tooLarge` before they are read.
  public var maxBytes: Int
  /// Local sources must resolve to a path inside every one of these directories (none: no limit).
  /// A pipeline's own root can narrow a runner's root, never widen it.
  public var roots: [String]
  /// The transports, tried in order by scheme.
  public var transports: [any FetchTransport]
  /// The schemes this stage may fetch (`file` covers plain paths); `nil` allows every scheme a
  /// transport serves. A server-facing pipeline can forbid `file` this way.
  public var allowedSchemes: Set<String>?

  /// The default byte limit (50 MB).
  public static let defaultMaxBytes = 50_000_000

  /// The transports every fetcher has without extra modules: local files and `data:` URLs.
  public static let builtInTransports: [any FetchTransport] = [FileTransport(), DataTransport()]

  public init(
    maxBytes: Int = Fetcher.defaultMaxBytes, root: String? = nil, allowedSchemes: Set<String>? = nil,
    transports: [any FetchTransport] = Fetcher.builtInTransports
  ) {
    self.init(maxBytes: maxBytes, roots: root.map { [$0] } ?? [], allowedSchemes: allowedSchemes, transports: transports)
  }

  public init(
    maxBytes: Int = Fetcher.defaultMaxBytes, roots: [String], allowedSchemes: Set<String>? = nil,
    transports: [any FetchTransport] = Fetcher.builtInTransports
  ) {
    self.maxBytes = maxBytes
    self.roots = roots
    self.allowedSchemes = allowedSchemes
    self.transports = transports
  }

  public var identifier: String { describe(transports.map(\.identifier)) }

  /// The identifier with the transports' cache identifiers (digests of their header values).
  public var cacheIdentifier: String { describe(transports.map(\.cacheIdentifier)) }

  private func describe(_ transportIDs: [String]) -> String {
    let schemes = allowedSchemes.map { ",schemes=" + $0.sorted().joined(separator: "+") } ?? ""
    return "fetch(maxBytes=\(maxBytes)\(roots.map { ",root=\($0)" }.joined())\(schemes),\(transportIDs.joined(separator: "+")))"
  }

  public func process(_ source: ImageSource, context: StageContext) async throws -> FetchedData {
    try await transport(for: source).fetch(source, limits: FetchLimits(maxBytes: maxBytes, roots: roots), context: context)
  }

  /// Files are disk work, `data:` URLs and malformed sources light work; other URLs go over the
  /// network.
  public func resource(for source: ImageSource) -> StageResource {
    switch source.location {
    case .file: .disk
    case .url(let url): url.scheme?.lowercased() == "data" ? .light : .network
    case .malformed: .light
    }
  }

  /// The transport serving `source`, once its scheme is allowed.
  func transport(for source: ImageSource) throws -> any FetchTransport {
    let scheme: String
    switch source.location {
    case .file: scheme = "file"
    case .url(let url): scheme = url.scheme?.lowercased() ?? ""
    case .malformed:
      throw PipelineError(
        .invalidInput, "\(source) is not a valid URL: check for spaces or stray characters", source: source.description)
    }
    if let allowedSchemes, !allowedSchemes.contains(scheme) {
      throw PipelineError(
        .forbiddenDestination,
        "\(scheme) sources are not allowed by this pipeline (allowSchemes: \(allowedSchemes.sorted().joined(separator: ", ")))",
        source: source.description)
    }
    guard let transport = transports.first(where: { $0.schemes.contains(scheme) }) else {
      let known = transports.flatMap(\.schemes).sorted().joined(separator: ", ")
      throw PipelineError(
        .invalidInput,
        "cannot fetch \(source): the scheme \"\(scheme)\" is not supported by this fetch stage (it supports: \(known), and plain paths)",
        source: source.description)
    }
    return transport
  }
}

/// The limits a transport enforces.
///
/// ```swift
/// let limits = FetchLimits(maxBytes: 10 << 20, roots: ["/srv/images"])
/// let data = try await transport.fetch(ImageSource("/srv/images/a.jpg"), limits: limits, context: context)
/// ```
public struct FetchLimits: Sendable {
  public var maxBytes: Int
  /// Local paths must resolve inside every one of these directories.
  public var roots: [String]

  public init(maxBytes: Int, roots: [String] = []) {
    self.maxBytes = maxBytes
    self.roots = roots
  }
}

/// Fetches sources of some URL schemes for the ``Fetcher``.
///
/// ```swift
/// struct MemoryTransport: FetchTransport {
///   let schemes: Set<String> = ["memory"]
///   func fetch(_ source: ImageSource, limits: FetchLimits, context: StageContext) async throws -> FetchedData { … }
/// }
/// ```
public protocol FetchTransport: Sendable {
  /// The lower-case URL schemes handled (`"file"` also covers plain paths).
  var schemes: Set<String> { get }
  /// A stable description of the transport's configuration (part of the fetch stage's identifier).
  var identifier: String { get }
  /// The identifier plus digests of what must not be shown (header values), for cache keys.
  var cacheIdentifier: String { get }
  /// Fetches the source within the limits.
  func fetch(_ source: ImageSource, limits: FetchLimits, context: StageContext) async throws -> FetchedData
}

extension FetchTransport {
  public var identifier: String { schemes.sorted().joined(separator: "+") }
  public var cacheIdentifier: String { identifier }
}

/// A transport that can ask the origin whether a cached copy is still current: HTTP with
/// `If-None-Match` / `If-Modified-Since`, local files by modification time. An unchanged source
/// comes back as ``FetchedData/notModified`` with no bytes.
package protocol ConditionalFetchTransport: FetchTransport {
  func fetch(
    _ source: ImageSource, limits: FetchLimits, validators: CacheValidators, context: StageContext
  ) async throws -> FetchedData
}

/// A first stage that can revalidate a stale cache entry instead of fetching from scratch.
package protocol RevalidatingStage: Sendable {
  /// Fetches `source` unless it still matches `validators` (then ``FetchedData/notModified``).
  func revalidate(_ source: ImageSource, validators: CacheValidators, context: StageContext) async throws -> FetchedData
}

extension Fetcher: RevalidatingStage {
  /// Revalidates through a `ConditionalFetchTransport`; other transports fetch again.
  public func revalidate(_ source: ImageSource, validators: CacheValidators, context: StageContext) async throws -> FetchedData {
    let transport = try transport(for: source)
    let limits = FetchLimits(maxBytes: maxBytes, roots: roots)
    if let conditional = transport as? any ConditionalFetchTransport {
      return try await conditional.fetch(source, limits: limits, validators: validators, context: context)
    }
    return try await transport.fetch(source, limits: limits, context: context)
  }
}

extension FileTransport: ConditionalFetchTransport {
  /// Not modified when the file's modification time equals the validator's `Last-Modified`.
  public func fetch(
    _ source: ImageSource, limits: FetchLimits, validators: CacheValidators, context: StageContext
  ) async throws -> FetchedData {
    let fetched = try await fetch(source, limits: limits, context: context)
    guard let stored = validators.lastModified, let modified = fetched.lastModified, HTTPDate.format(modified) == stored else {
      return fetched
    }
    var unchanged = FetchedData(
      source: source, bytes: ImageBytes([]), contentType: fetched.contentType, lastModified: modified,
      metadata: fetched.metadata)
    unchanged.notModified = true
    return unchanged
  }
}

extension AnyStage {
  /// A stand-in for this first stage that revalidates with `validators` (a ``RevalidatingStage``),
  /// or `nil` when this stage cannot revalidate. It has this stage's kind, identifier and resource,
  /// and its own cache identifier, so that it runs with the fetch's time limit and scheduling and
  /// is shared only with identical revalidations.
  package func revalidation(validators: CacheValidators) -> AnyStage? {
    guard let revalidating = base as? any RevalidatingStage else { return nil }
    let standIn = Revalidation(original: self, revalidating: revalidating, validators: validators)
    return AnyStage(standIn, kind: kind, identifier: identifier, fusedKinds: fusedKinds)
  }
}

/// A first stage sending a stale entry's validators: ``AnyStage/revalidation(validators:)``.
private struct Revalidation: Stage {
  static var kind: String { "fetch" }
  let original: AnyStage
  let revalidating: any RevalidatingStage
  let validators: CacheValidators

  var identifier: String { original.identifier }
  var cacheIdentifier: String {
    func field(_ value: String?) -> String { value.map { "\($0.utf8.count):\($0)" } ?? "-" }
    let sent = field(validators.etag) + field(validators.lastModified)
    return original.cacheIdentifier + "#revalidate(" + RequestDigest.hex(sent, bytes: 16) + ")"
  }

  func process(_ input: ImageSource, context: StageContext) async throws -> FetchedData {
    try await revalidating.revalidate(input, validators: validators, context: context)
  }

  func resource(for input: ImageSource) -> StageResource { original.resource(for: input) }
}

/// A transport that can write response bodies into unnamed files of a directory as they arrive
/// instead of into memory (the HTTP transport: ``HTTPOptions/spoolDirectory``), for a pipeline
/// whose fetched bytes are saved as they are.
package protocol SpoolingTransport: FetchTransport {
  /// This transport, writing bodies into unnamed files in `directory`.
  func spooling(into directory: String) -> Self
}

extension AnyStage {
  /// This stage with the bodies of its spooling transports (``SpoolingTransport``) written into
  /// `directory` as they arrive, when it is a fetch stage; otherwise the stage itself. Its kind
  /// and identifiers stay: the bytes fetched are the same.
  ///
  /// ```swift
  /// let stages = graph.stages.map { $0.spoolingBodies(into: "out") }
  /// ```
  package func spoolingBodies(into directory: String) -> AnyStage {
    guard var fetcher = base as? Fetcher else { return self }
    fetcher.transports = fetcher.transports.map { transport in
      (transport as? any SpoolingTransport)?.spooling(into: directory) ?? transport
    }
    return AnyStage(fetcher, kind: kind, identifier: identifier, fusedKinds: fusedKinds)
  }
}
