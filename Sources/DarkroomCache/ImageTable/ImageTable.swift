import DarkroomCore
import Foundation

/// One memory-mapped file of fixed-size entries of decoded pixels (Path's FastImageCache, for a
/// server): `exists`, `retrieve` (synchronous when present; with a provider, asynchronous
/// otherwise), `store`, `delete`, `cancel`, `reset`, and a delegate told about failures.
///
/// Entries are keyed by a stable entity id. When every slot is used, a store replaces the least
/// recently used entry that is not leased. Every entry carries a CRC-32 of its pixels, verified the
/// first time it is read in a process, and a state word written last: a process killed mid-write
/// leaves an entry that opening clears, never garbage. The file is locked: one process has a table
/// open at a time.
///
/// ```swift
/// let table = try ImageTable(directory: "/var/cache/darkroom/tables", format: format)
/// let entry = try await table.retrieve("user-42") { try await renderAvatar(42) }
/// ```
public final class ImageTable: @unchecked Sendable {
  public let format: ImageTableFormat
  /// The table's file (`<directory>/<name>.imagetable`).
  public let fileURL: URL
  let file: ImageTableFile
  private let lock = NSLock()
  private var slots: [String: Int] = [:]  // entity id → slot, guarded by `lock`
  private var leases: [Int: Int] = [:]  // slot → live entries, guarded by `lock`
  private var verified: Set<Int> = []  // guarded by `lock`
  private var writing: Set<Int> = []  // guarded by `lock`
  private var clock: UInt64 = 0  // guarded by `lock`
  private var providers: [String: (token: UUID, task: Task<ImageTableEntry, any Error>)] = [:]  // guarded by `lock`
  private weak var storedDelegate: (any ImageTableDelegate)?  // guarded by `lock`

  /// The pixels a provider hands over: `height` rows of `width × bytesPerPixel` bytes.
  public struct Pixels: Sendable {
    public var width: Int
    public var height: Int
    public var bytes: [UInt8]
    public var info: ImageTableEntryInfo?

    public init(width: Int, height: Int, bytes: [UInt8], info: ImageTableEntryInfo? = nil) {
      self.width = width
      self.height = height
      self.bytes = bytes
      self.info = info
    }
  }

  /// Opens (or creates) the table of `format` in `directory`. With `resetOnMismatch`, a file of
  /// another format is emptied and reused instead of failing with `cacheUnavailable`.
  public init(directory: String, format: ImageTableFormat, resetOnMismatch: Bool = false) throws {
    try format.validate()
    do {
      try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
    } catch {
      throw PipelineError(
        .cacheUnavailable, "cannot create the image table directory \(directory): \(error.localizedDescription)")
    }
    self.format = format
    fileURL = URL(fileURLWithPath: directory).appendingPathComponent(format.name + ".imagetable")
    file = try ImageTableFile(path: fileURL.path, format: format, recreateOnMismatch: resetOnMismatch)
    for slot in 0..<format.maxCount {
      switch file.state(slot) {
      case .valid:
        slots[file.info(slot).entityID] = slot
        clock = max(clock, file.access(slot))
      case .writing:
        file.setState(.empty, slot)  // a write that never finished
      case .empty:
        break
      }
    }
  }

  /// Where failures are reported (held weakly).
  public var delegate: (any ImageTableDelegate)? {
    get { lock.withLock { storedDelegate } }
    set { lock.withLock { storedDelegate = newValue } }
  }

  /// How many entries the table holds.
  public var count: Int { lock.withLock { slots.count } }

  /// Whether reading `entityID` now would first verify its checksum (reading every page of it,
  /// possibly from disk): callers on an async executor can move such a first read to a thread
  /// that may block.
  public func needsVerification(_ entityID: String) -> Bool {
    lock.withLock { slots[entityID].map { !verified.contains($0) } ?? false }
  }

  /// Whether an entry for `entityID` is stored (its checksum is not checked here).
  public func exists(_ entityID: String) -> Bool { lock.withLock { slots[entityID] != nil } }

  /// The entry for `entityID`, synchronously, or `nil`. A corrupt entry is dropped, reported to the
  /// delegate, and is `nil`.
  public func retrieve(_ entityID: String) -> ImageTableEntry? {
    let found = lock.withLock { () -> (slot: Int, verified: Bool)? in
      guard let slot = slots[entityID] else { return nil }
      clock += 1
      file.setAccess(clock, slot)
      leases[slot, default: 0] += 1
      return (slot, verified.contains(slot))
    }
    guard let found else { return nil }
    let info = file.info(found.slot)
    let entry = ImageTableEntry(info: info, layout: format.layout, slot: found.slot, file: file) { [weak self] slot in
      self?.releaseLease(slot)
    }
    if !found.verified {
      guard Checksum.crc32(entry.pixels) == file.checksum(found.slot) else {
        lock.withLock {
          if slots[entityID] == found.slot { slots[entityID] = nil }
          file.setState(.empty, found.slot)
        }
        report(
          PipelineError(.cacheCorrupt, "the image table entry \(entityID) in \(fileURL.path) failed its checksum; it was dropped")
        )
        return nil
      }
      _ = lock.withLock { verified.insert(found.slot) }
    }
    return entry
  }

  /// The entry for `entityID`: at once when stored, otherwise from `provider` (run once however
  /// many callers wait; ``cancel(_:)`` stops it), stored and returned.
  public func retrieve(_ entityID: String, provider: @escaping @Sendable () async throws -> Pixels) async throws
    -> ImageTableEntry
  {
    if let entry = retrieve(entityID) { return entry }
    let task = lock.withLock { () -> Task<ImageTableEntry, any Error> in
      if let running = providers[entityID] { return running.task }
      let token = UUID()
      let task = Task { [self] () throws -> ImageTableEntry in
        defer { lock.withLock { if providers[entityID]?.token == token { providers[entityID] = nil } } }
        do {
          let pixels = try await provider()
          try Task.checkCancellation()
          return try pixels.bytes.withUnsafeBytes { bytes in
            try store(
              entityID, pixels: bytes,
              info: pixels.info ?? ImageTableEntryInfo(entityID: entityID, width: pixels.width, height: pixels.height))
          }
        } catch let error as PipelineError {
          report(error)
          throw error
        } catch let error as CancellationError {
          throw error
        } catch {
          let failure = PipelineError(
            .cacheFailed, "the provider for image table entry \(entityID) failed: \(error)", cause: error)
          report(failure)
          throw failure
        }
      }
      providers[entityID] = (token, task)
      return task
    }
    return try await task.value
  }

  /// Stores pixels (`info.height` rows of `info.width × bytesPerPixel` bytes) for `entityID`,
  /// replacing its old entry, and returns the new entry.
  @discardableResult
  public func store(_ entityID: String, pixels: UnsafeRawBufferPointer, info: ImageTableEntryInfo) throws -> ImageTableEntry {
    var info = info
    info.entityID = entityID
    guard !entityID.isEmpty, entityID.utf8.count <= 64 else {
      throw PipelineError(.cacheFailed, "image table entity ids are 1–64 bytes; got \(entityID.utf8.count): hash longer keys")
    }
    guard (1...format.width).contains(info.width), (1...format.height).contains(info.height) else {
      throw PipelineError(
        .cacheFailed,
        "a \(info.width)×\(info.height) image does not fit the \(format.width)×\(format.height) table \"\(format.name)\"; resize to fit first"
      )
    }
    let expected = info.width * info.height * format.layout.bytesPerPixel
    guard pixels.count == expected else {
      throw PipelineError(
        .cacheFailed,
        "\(pixels.count) bytes given for a \(info.width)×\(info.height) \(format.layout.rawValue) entry of \(expected) bytes")
    }
    let slot = try lock.withLock { () throws -> Int in
      if let old = slots.removeValue(forKey: entityID) {
        file.setState(.empty, old)  // its pixels stay intact while leased: leased slots are never reused
      }
      guard let slot = freeSlot() else {
        throw PipelineError(.cacheFailed, "every entry of the image table \"\(format.name)\" is in use; raise maxCount")
      }
      writing.insert(slot)
      verified.remove(slot)
      file.setState(.writing, slot)
      return slot
    }
    file.pixels(slot).copyMemory(from: pixels.baseAddress!, byteCount: expected)
    file.setInfo(info, checksum: Checksum.crc32(pixels), slot)
    return lock.withLock {
      writing.remove(slot)
      clock += 1
      file.setAccess(clock, slot)
      file.setState(.valid, slot)
      slots[entityID] = slot
      verified.insert(slot)
      leases[slot, default: 0] += 1
      return ImageTableEntry(info: file.info(slot), layout: format.layout, slot: slot, file: file) { [weak self] slot in
        self?.releaseLease(slot)
      }
    }
  }

  /// Removes the entry for `entityID` (its pixels stay intact while leased).
  public func delete(_ entityID: String) {
    lock.withLock {
      guard let slot = slots.removeValue(forKey: entityID) else { return }
      file.setState(.empty, slot)
    }
  }

  /// Removes every entry whose info satisfies `predicate`; returns how many.
  @discardableResult
  public func delete(where predicate: (ImageTableEntryInfo) -> Bool) -> Int {
    lock.withLock {
      let doomed = slots.filter { predicate(file.info($0.value)) }
      for (id, slot) in doomed {
        slots[id] = nil
        file.setState(.empty, slot)
      }
      return doomed.count
    }
  }

  /// Updates an entry's expiry and validators (a revalidated cache entry).
  public func refresh(_ entityID: String, expiresAt: Date?, validators: CacheValidators) {
    lock.withLock {
      guard let slot = slots[entityID] else { return }
      var info = file.info(slot)
      info.expiresAt = expiresAt
      info.validators = validators
      file.setInfo(info, checksum: file.checksum(slot), slot)
    }
  }

  /// The info of every entry.
  public var entries: [ImageTableEntryInfo] { lock.withLock { slots.values.map { file.info($0) } } }

  /// Whether a provider is running for `entityID`.
  public func isProviding(_ entityID: String) -> Bool { lock.withLock { providers[entityID] != nil } }

  /// Stops the provider running for `entityID`; its waiters fail with `CancellationError`.
  public func cancel(_ entityID: String) {
    lock.withLock { providers.removeValue(forKey: entityID) }?.task.cancel()
  }

  /// Empties the table (leased pixels stay intact until released).
  public func reset() {
    let running = lock.withLock { () -> [Task<ImageTableEntry, any Error>] in
      for slot in slots.values { file.setState(.empty, slot) }
      slots.removeAll()
      verified.removeAll()
      defer { providers.removeAll() }
      return providers.values.map(\.task)
    }
    for task in running { task.cancel() }
  }

  /// An empty slot, or the least recently used one that is not leased or being written.
  private func freeSlot() -> Int? {
    let used = Set(slots.values)
    var oldest: (slot: Int, access: UInt64)?
    for slot in 0..<format.maxCount where !writing.contains(slot) && leases[slot, default: 0] == 0 {
      guard used.contains(slot) else { return slot }
      let access = file.access(slot)
      if oldest == nil || access < oldest!.access { oldest = (slot, access) }
    }
    guard let victim = oldest?.slot else { return nil }
    if let id = slots.first(where: { $0.value == victim })?.key { slots[id] = nil }
    return victim
  }

  private func releaseLease(_ slot: Int) {
    lock.withLock {
      let remaining = leases[slot, default: 1] - 1
      leases[slot] = remaining > 0 ? remaining : nil
    }
  }

  private func report(_ error: PipelineError) {
    guard let delegate = lock.withLock({ storedDelegate }) else { return }
    delegate.imageTable(self, didFail: error)
  }
}
