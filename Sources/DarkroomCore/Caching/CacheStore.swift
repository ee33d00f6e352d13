import Foundation

/// Where a ``Cache`` checkpoint keeps values: memory, a disk directory, image tables, or a store
/// of your own.
///
/// A store returns entries that are fresh or that can be revalidated (stale with validators); it
/// drops expired entries that cannot. Every store keeps an index from source identity to keys, so
/// ``purge(source:)`` removes every variant of one source without scanning.
///
/// ```swift
/// struct NullStore: CacheStore {
///   let name = "null"
///   func entry(forKey key: String) async throws -> CacheEntry? { nil }
///   func setEntry(_ entry: CacheEntry, forKey key: String, source: String) async throws {}
///   …
/// }
/// ```
public protocol CacheStore: Sendable {
  /// The store's kind for events and statistics (`"memory"`, `"disk"`, `"table"`).
  var name: String { get }
  /// The entry for `key` when it is fresh or can be revalidated.
  func entry(forKey key: String) async throws -> CacheEntry?
  /// Stores an entry; `source` is the identity of the source it derives from (for purging).
  func setEntry(_ entry: CacheEntry, forKey key: String, source: String) async throws
  /// Gives a revalidated entry (a `304 Not Modified`) a new expiry and validators.
  func refresh(key: String, expiresAt: Date?, validators: CacheValidators) async throws
  /// Whether values of this type can be kept (a disk store needs a byte form).
  func accepts(_ type: Any.Type) -> Bool
  /// What values it keeps, for error messages ("bytes (after fetch) and encoded images (after encode)").
  var keeps: String { get }
  /// Removes one entry.
  func removeEntry(forKey key: String) async throws
  /// Removes everything.
  func removeAll() async throws
  /// Removes every value derived from `source` — every variant, prefix and upstream
  /// configuration; returns how many entries went.
  @discardableResult
  func purge(source: ImageSource) async throws -> Int
  /// What the store holds.
  func statistics() async throws -> CacheStatistics
  /// The store's clock (injectable in tests).
  var now: Date { get }
  /// Readies a value that will be stored when the operation finishes, as the checkpoint hands it
  /// on: a store of decoded pixels decodes them into memory here, because a lazy image can be
  /// read only once and the next stage reads it first.
  func prepare(_ value: any Sendable, context: StageContext) async throws -> any Sendable
  /// The caller is done with the store for now (``PipelineResources/close()`` calls this): it
  /// writes back what it batches and leaves its files ready for the next process. The store stays
  /// usable. A disk store writes its hits' access times, which it records in batches.
  func close() async
}

extension CacheStore {
  public func accepts(_ type: Any.Type) -> Bool { true }
  public var keeps: String { "any value" }
  public var now: Date { Date() }
  public func prepare(_ value: any Sendable, context: StageContext) async throws -> any Sendable { value }
  public func close() async {}
}

/// Cache keys: the checkpoint's prefix, the source identity and the upstream stage identifiers,
/// joined by the unit separator (U+001F), which never appears in identities.
package enum CacheKey {
  static let separator: Character = "\u{1F}"

  /// The identity stores record for `source` (``ImageSource/resolved``), for purging: for a file,
  /// its path with symlinks and `..` resolved. Reads the file system for files.
  public static func purgeIdentity(of source: ImageSource) -> String { source.resolved.identity }

  /// The key of a checkpoint.
  public static func make(prefix: String, source identity: String, upstream: [String]) -> String {
    ([prefix, identity] + upstream).joined(separator: String(separator))
  }

  /// What a source's entries are keyed under: its ``ImageSource/requestIdentity`` and, for a local
  /// file, which version of the file it is (device, inode, size, modification and change times to
  /// the nanosecond), so an edited file is a new key. `nil` for a file that cannot be inspected:
  /// nothing is read from or written to a cache for it. For files this calls `stat(2)`: call it
  /// off the cooperative pool.
  ///
  /// ```swift
  /// let key = CacheKey.make(prefix: "", source: CacheKey.identity(of: source) ?? "", upstream: ids)
  /// ```
  public static func identity(of source: ImageSource) -> String? { identities(of: source)?.key }

  /// The key identity and the identity stores record (``purgeIdentity(of:)``), from one
  /// `realpath` and one `stat` for a file; `nil` for a file that cannot be inspected.
  static func identities(of source: ImageSource) -> (key: String, recorded: String)? {
    guard case .file(let path) = source.location else { return (source.requestIdentity, source.identity) }
    guard let real = FileTransport.realPath(path), let version = FileVersion(path: real) else { return nil }
    let recorded = ImageSource(path: real).identity
    return (recorded + "@" + version.description, recorded)
  }

  /// The source identity a key belongs to.
  public static func sourceIdentity(of key: String) -> Substring? {
    let parts = key.split(separator: separator, maxSplits: 2, omittingEmptySubsequences: false)
    return parts.count >= 2 ? parts[1] : nil
  }
}

/// What a value costs to keep in memory, in bytes (values without it count 1 KiB), and the value
/// as a memory store keeps it.
package protocol CacheCost {
  var cacheCost: Int { get }
  /// The value to keep for long: bytes in a recycled buffer much larger than they are are copied
  /// into memory of their size (``ImageBytes/compacted()``), so that what the store keeps is
  /// what its cost says.
  func keptCompactly() -> any Sendable
}

extension CacheCost where Self: Sendable {
  /// Kept as it is.
  package func keptCompactly() -> any Sendable { self }
}

extension EncodedImage: CacheCost {
  public var cacheCost: Int { bytes.count }
  package func keptCompactly() -> any Sendable { compacting(self, \.bytes) }
}

extension FetchedData: CacheCost {
  public var cacheCost: Int { bytes.count }
  package func keptCompactly() -> any Sendable { compacting(self, \.bytes) }
}

/// `value` with the bytes at `path` compacted (``ImageBytes/compacted()``).
private func compacting<Value: Sendable>(_ value: Value, _ path: WritableKeyPath<Value, ImageBytes>) -> any Sendable {
  var kept = value
  kept[keyPath: path] = value[keyPath: path].compacted()
  return kept
}

/// A store that is named but not opened: what a `cache` stage gets while its pipeline is only
/// validated, so validation creates no directories. It accepts what the real store accepts and
/// fails every use.
package struct UnopenedStore: CacheStore {
  public let name: String
  public let keeps: String
  private let acceptsType: @Sendable (Any.Type) -> Bool

  public init(name: String, keeps: String, accepts: @escaping @Sendable (Any.Type) -> Bool) {
    self.name = name
    self.keeps = keeps
    self.acceptsType = accepts
  }

  public func accepts(_ type: Any.Type) -> Bool { acceptsType(type) }
  private func unopened() -> PipelineError {
    PipelineError(.cacheUnavailable, "the \(name) store was not opened (the pipeline was loaded for validation only)")
  }
  public func entry(forKey key: String) async throws -> CacheEntry? { throw unopened() }
  public func setEntry(_ entry: CacheEntry, forKey key: String, source: String) async throws { throw unopened() }
  public func refresh(key: String, expiresAt: Date?, validators: CacheValidators) async throws { throw unopened() }
  public func removeEntry(forKey key: String) async throws { throw unopened() }
  public func removeAll() async throws { throw unopened() }
  public func purge(source: ImageSource) async throws -> Int { throw unopened() }
  public func statistics() async throws -> CacheStatistics { throw unopened() }
}
