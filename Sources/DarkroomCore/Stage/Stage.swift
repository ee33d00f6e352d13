/// One step of a pipeline: turns an input into an output.
///
/// Every stage — Darkroom's own fetcher, decoder, cropper, resizer, encoder and writer, and any
/// stage a user writes — conforms to this one protocol. A stage is a `Sendable` value holding its
/// configuration; ``identifier`` describes that configuration in a stable string used in cache
/// keys, logs and errors. Stages that block on C libraries hand that work to
/// ``StageContext/blocking(_:)`` so that the cooperative thread pool never blocks.
///
/// ```swift
/// struct Upright: Stage {
///   static let kind = "upright"
///   var identifier: String { "upright" }
///   func process(_ input: DecodedImage, context: StageContext) async throws -> DecodedImage {
///     try await context.blocking { input.with(try input.image.autorotated()) }
///   }
/// }
/// ```
public protocol Stage<Input, Output>: Sendable {
  associatedtype Input: Sendable
  associatedtype Output: Sendable

  /// The kind name of this stage (`"resize"`), as used in JSON definitions and events.
  static var kind: String { get }

  /// A stable description of this stage's configuration (`"resize(w=256,h=256,fill,lanczos3)"`).
  /// Two stages with equal identifiers must produce equal outputs from equal inputs.
  var identifier: String { get }

  /// The identifier cache keys and shared in-flight work use: ``identifier`` unless the output
  /// depends on configuration that must not be shown in logs and events (a request header's value,
  /// a token), which a stage then adds here as a digest. Two stages with equal cache identifiers
  /// must produce equal outputs from equal inputs.
  var cacheIdentifier: String { get }

  /// Turns an input into an output, or throws (preferably a ``PipelineError``).
  func process(_ input: Input, context: StageContext) async throws -> Output

  /// What processing `input` mostly uses, so that an ``ImageLoader`` can bound it: `.cpu` unless
  /// a stage says otherwise (a fetcher says `.network` for URLs and `.disk` for files).
  func resource(for input: Input) -> StageResource
}

extension Stage {
  /// The kind name, from an instance.
  public var kind: String { Self.kind }

  /// CPU work, by default.
  public func resource(for input: Input) -> StageResource { .cpu }

  /// The ``identifier``, by default.
  public var cacheIdentifier: String { identifier }
}

/// The resource a stage's work mostly uses: each has its own concurrency limit in an
/// ``ImageLoader`` (network transfers, CPU work, disk I/O); `.light` work (a pass-through, a
/// cache checkpoint) is never queued.
///
/// ```swift
/// extension Uploader {
///   // Queued with the network transfers of an ImageLoader, not with CPU work.
///   func resource(for input: EncodedImage) -> StageResource { .network }
/// }
/// ```
public enum StageResource: String, Sendable, Hashable, CaseIterable, Codable {
  case network, cpu, disk, light
}

/// What a stage may know and use about the operation that runs it.
///
/// ```swift
/// func process(_ input: FetchedData, context: StageContext) async throws -> FetchedData {
///   context.log("checked \(input.bytes.count) bytes")
///   return input
/// }
/// ```
public struct StageContext: Sendable {
  /// The operation's id.
  public var operationID: OperationID
  /// The pipeline's name.
  public var pipelineName: String
  /// The source the operation processes, when its input was an ``ImageSource``.
  public var source: ImageSource?
  /// The variant being produced, when the pipeline declares variants (see ``PipelineVariants``).
  public var variant: String?
  /// The pool blocking work runs on.
  package var pool: BlockingPool
  let emitNote: @Sendable (String) -> Void
  let emitProgress: @Sendable (Int, Int?) -> Void
  let emitCache: @Sendable (CacheEvent) -> Void

  /// A context for running a stage outside a pipeline (in a test, say): events go to the given
  /// closures, blocking work to the process's shared pool.
  public init(
    operationID: OperationID = OperationID(), pipelineName: String = "", source: ImageSource? = nil,
    emitNote: @escaping @Sendable (String) -> Void = { _ in },
    emitProgress: @escaping @Sendable (Int, Int?) -> Void = { _, _ in },
    emitCache: @escaping @Sendable (CacheEvent) -> Void = { _ in }
  ) {
    self.init(
      operationID: operationID, pipelineName: pipelineName, source: source, pool: .shared, emitNote: emitNote,
      emitProgress: emitProgress, emitCache: emitCache)
  }

  package init(
    operationID: OperationID = OperationID(), pipelineName: String = "", source: ImageSource? = nil,
    pool: BlockingPool, emitNote: @escaping @Sendable (String) -> Void = { _ in },
    emitProgress: @escaping @Sendable (Int, Int?) -> Void = { _, _ in },
    emitCache: @escaping @Sendable (CacheEvent) -> Void = { _ in }
  ) {
    self.operationID = operationID
    self.pipelineName = pipelineName
    self.source = source
    self.pool = pool
    self.emitNote = emitNote
    self.emitProgress = emitProgress
    self.emitCache = emitCache
  }

  /// Reports a cache checkpoint's outcome as a `cache` event.
  public func reportCache(_ event: CacheEvent) { emitCache(event) }

  /// Reports transfer progress as a `progress` event. Callers rate-limit it (a few per second).
  public func reportProgress(received: Int, expected: Int?) { emitProgress(received, expected) }

  /// Runs blocking work (a C call, large file I/O) on the bounded blocking pool and returns its
  /// result. The calling task is suspended, never blocked; if it is cancelled before the work
  /// starts, the work never runs and `CancellationError` is thrown.
  public func blocking<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await pool.run(work)
  }

  /// Adds a note to the operation's event stream (`note` events), for example a fallback taken.
  public func log(_ message: String) { emitNote(message) }
}
