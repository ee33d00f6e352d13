import DarkroomCore
import Foundation

/// One file of fixed-size entries of decoded pixels (Path's FastImageCache, for a server):
/// `exists`, `retrieve` (synchronous when present; with a provider, asynchronous otherwise),
/// `store`, `delete`, `cancel`, `reset`, and a delegate told about failures.
///
/// Entries are keyed by a stable entity id. When every slot is used, a store replaces the least
/// recently used entry that is not leased. A retrieved entry owns a copy of its pixels, read from
/// the file (one copy from the page cache, no decode). The file is never memory-mapped, so another
/// process truncating it, or a full disk, is a miss or a `cacheFailed` error, never a signal.
/// Nothing read from the file is trusted: its header page and every entry header are range-checked
/// and carry a CRC-32, checked when the table opens (damaged entries are dropped and reported to
/// the delegate once it is set); every entry's pixels carry a CRC-32, verified on every read (another
/// process may truncate and regrow the file between two reads); a state word is written last, so a process killed mid-write leaves an
/// entry that opening clears, never garbage. The file is locked: one process has a table open at a
/// time.
///
/// ```swift
/// let table = try ImageTable(directory: "/var/cache/darkroom/tables", format: format)
/// let entry = try await table.retrieve("user-42") { try await renderAvatar(42) }
/// ```
package final class ImageTable: Sendable {
  public let format: ImageTableFormat
  /// The table's file (`<directory>/<name>.imagetable`).
  public let fileURL: URL
  let file: ImageTableFile
  private let state: Protected<State>

  private struct State {
    var slots: [String: Int] = [:]  // entity id → slot
    var leases: [Int: Int] = [:]  // slot → live entries
    var verified: Set<Int> = []
    var writing: Set<Int> = []
    var clock: UInt64 = 0
    var providers: [String: (token: UUID, task: Task<ImageTableEntry, any Error>)] = [:]
    weak var storedDelegate: (any ImageTableDelegate)?
    var pending: [PipelineError] = []  // found on open, for the first delegate
  }

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
    var opened = State()
    for (slot, header) in file.entries { opened.slots[header.info.entityID] = slot }
    opened.clock = file.latestAccess
    opened.pending = file.droppedOnOpen.map { [fileURL] slot, reason in
      PipelineError(
        .cacheCorrupt, "the image table entry in slot \(slot) of \(fileURL.path) was damaged (\(reason)); it was dropped")
    }
    state = Protected(opened)
  }

  /// Where failures are reported (held weakly). Damaged entries dropped when the table was opened
  /// are reported to the first delegate set.
  public var delegate: (any ImageTableDelegate)? {
    get { state.withLock { $0.storedDelegate } }
    set {
      let found = state.withLock { state -> [PipelineError] in
        state.storedDelegate = newValue
        guard newValue != nil else { return [] }
        defer { state.pending = [] }
        return state.pending
      }
      for error in found { report(error) }
    }
  }

  /// How many entries the table holds.
  public var count: Int { state.withLock { $0.slots.count } }

  /// Whether `entityID` has not been read (and verified) in this process yet. Every read verifies
  /// the checksum of what it read, and every read is a blocking `pread`: callers on an async
  /// executor move every read to a thread that may block, whatever this says.
  public func needsVerification(_ entityID: String) -> Bool {
    state.withLock { state in state.slots[entityID].map { !state.verified.contains($0) } ?? false }
  }

  /// Whether an entry for `entityID` is stored (its checksum is not checked here).
  public func exists(_ entityID: String) -> Bool { state.withLock { $0.slots[entityID] != nil } }

  /// The entry for `entityID`, synchronously, or `nil`: its pixels are read from the file into
  /// memory the entry owns and their checksum is verified, on every read (a blocking read: call
  /// it off the cooperative pool). A corrupt entry, or one the file no longer holds (truncated by
  /// another process), is dropped, reported to the delegate as `cacheCorrupt`, and is `nil`.
  public func retrieve(_ entityID: String) -> ImageTableEntry? {
    let found = state.withLock { state -> (slot: Int, header: ImageTableFile.Header, verified: Bool)? in
      guard let slot = state.slots[entityID], let header = file.entry(slot) else { return nil }
      state.clock += 1
      file.setAccess(state.clock, slot)
      state.leases[slot, default: 0] += 1
      return (slot, header, state.verified.contains(slot))
    }
    guard let found else { return nil }
    let info = found.header.info
    // Width and height were checked against the format when the header was read or stored.
    let count = info.width * info.height * format.layout.bytesPerPixel
    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: ImageTableFile.pageSize)
    let read = file.readPixels(found.slot, into: buffer)
    var problem: String?
    if !read.complete {
      problem =
        read.error == 0
        ? "the file ends before its pixels (truncated since it was opened)"
        : "its pixels cannot be read: \(String(cString: strerror(read.error)))"
    } else if Checksum.crc32(UnsafeRawBufferPointer(buffer)) != found.header.checksum {
      // Every read: another process may have truncated and regrown the file since the last one
      // (zeros where pixels were). The copy is checked, so what is checked is what is served.
      problem = "its pixels fail their checksum"
    }
    if let problem {
      buffer.deallocate()
      releaseLease(found.slot)
      // A short read: another process truncated the file. Repair it before writing anything, as
      // any write would extend the file again and hide where it was cut.
      var failures = read.complete ? [] : repairTruncation()
      failures.append(
        PipelineError(
          .cacheCorrupt, "the image table entry \(entityID) in \(fileURL.path) is damaged (\(problem)); it was dropped"))
      failures += state.withLock { state -> [PipelineError] in
        guard state.slots[entityID] == found.slot else { return [] }
        state.slots[entityID] = nil
        state.verified.remove(found.slot)
        do throws(PipelineError) {
          try file.clear(found.slot)
        } catch {
          return [error]
        }
        return []
      }
      for failure in failures { report(failure) }
      return nil
    }
    if !found.verified { _ = state.withLock { $0.verified.insert(found.slot) } }
    return ImageTableEntry(info: info, layout: format.layout, slot: found.slot, pixels: buffer) { [weak self] slot in
      self?.releaseLease(slot)
    }
  }

  /// The entry for `entityID`: at once when stored, otherwise from `provider` (run once however
  /// many callers wait; ``cancel(_:)`` stops it), stored and returned.
  public func retrieve(_ entityID: String, provider: @escaping @Sendable () async throws -> Pixels) async throws
    -> ImageTableEntry
  {
    if let entry = retrieve(entityID) { return entry }
    let task = state.withLock { state -> Task<ImageTableEntry, any Error> in
      if let running = state.providers[entityID] { return running.task }
      let token = UUID()
      let task = Task { [self] () throws -> ImageTableEntry in
        defer {
          self.state.withLock { state in if state.providers[entityID]?.token == token { state.providers[entityID] = nil } }
        }
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
      state.providers[entityID] = (token, task)
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
    guard let source = pixels.baseAddress else {
      throw PipelineError(.cacheFailed, "no pixels given for the image table entry \(entityID)")
    }
    for date in [info.writtenAt] + (info.expiresAt.map { [$0] } ?? [])
    where !ImageTableFile.dateRange.contains(date.timeIntervalSince1970) {
      throw PipelineError(
        .cacheFailed, "the date \(date.timeIntervalSince1970) of image table entry \(entityID) is outside years 1–9999")
    }
    if let size = file.currentSize, size < file.size {
      for failure in repairTruncation() { report(failure) }
    }
    let slot = try state.withLock { state throws(PipelineError) -> Int in
      if let old = state.slots.removeValue(forKey: entityID) {
        state.verified.remove(old)
        try file.clear(old)
      }
      guard let slot = freeSlot(in: &state) else {
        throw PipelineError(.cacheFailed, "every entry of the image table \"\(format.name)\" is in use; raise maxCount")
      }
      state.verified.remove(slot)
      try file.markWriting(slot)
      state.writing.insert(slot)
      return slot
    }
    let copy = UnsafeMutableRawBufferPointer.allocate(byteCount: expected, alignment: ImageTableFile.pageSize)
    copy.copyMemory(from: UnsafeRawBufferPointer(start: source, count: expected))
    do {
      try file.writePixels(UnsafeRawBufferPointer(copy), slot)
      return try state.withLock { state throws(PipelineError) -> ImageTableEntry in
        state.clock += 1
        try file.setValid(
          ImageTableFile.Header(checksum: Checksum.crc32(UnsafeRawBufferPointer(copy)), access: state.clock, info: info), slot)
        state.writing.remove(slot)
        state.slots[entityID] = slot
        state.verified.insert(slot)
        state.leases[slot, default: 0] += 1
        return ImageTableEntry(info: info, layout: format.layout, slot: slot, pixels: copy) { [weak self] slot in
          self?.releaseLease(slot)
        }
      }
    } catch {
      copy.deallocate()
      state.withLock { state in
        state.writing.remove(slot)
        try? file.clear(slot)  // else left `writing`, which opening clears
      }
      throw error
    }
  }

  /// Removes the entry for `entityID` (entries already retrieved keep their pixels).
  public func delete(_ entityID: String) {
    let failure = state.withLock { state -> PipelineError? in
      guard let slot = state.slots.removeValue(forKey: entityID) else { return nil }
      state.verified.remove(slot)
      do throws(PipelineError) {
        try file.clear(slot)
        return nil
      } catch {
        return error
      }
    }
    if let failure { report(failure) }
  }

  /// Removes every entry whose info satisfies `predicate`; returns how many.
  @discardableResult
  public func delete(where predicate: (ImageTableEntryInfo) -> Bool) -> Int {
    let (count, failures) = state.withLock { state -> (Int, [PipelineError]) in
      let doomed = state.slots.filter { file.entry($0.value).map { predicate($0.info) } ?? false }
      var failures: [PipelineError] = []
      for (id, slot) in doomed {
        state.slots[id] = nil
        state.verified.remove(slot)
        do throws(PipelineError) { try file.clear(slot) } catch { failures.append(error) }
      }
      return (doomed.count, failures)
    }
    for failure in failures { report(failure) }
    return count
  }

  /// Updates an entry's expiry and validators (a revalidated cache entry); its header is rewritten
  /// with a new checksum. A failed write is reported to the delegate (the entry keeps its old
  /// expiry on disk).
  public func refresh(_ entityID: String, expiresAt: Date?, validators: CacheValidators) {
    if let expiresAt, !ImageTableFile.dateRange.contains(expiresAt.timeIntervalSince1970) { return }
    let failure = state.withLock { state -> PipelineError? in
      guard let slot = state.slots[entityID] else { return nil }
      do throws(PipelineError) {
        try file.update(slot) { info in
          info.expiresAt = expiresAt
          info.validators = validators
        }
        return nil
      } catch {
        return error
      }
    }
    if let failure { report(failure) }
  }

  /// The info of every entry.
  public var entries: [ImageTableEntryInfo] { state.withLock { state in state.slots.values.compactMap { file.entry($0)?.info } } }

  /// Whether a provider is running for `entityID`.
  public func isProviding(_ entityID: String) -> Bool { state.withLock { $0.providers[entityID] != nil } }

  /// Stops the provider running for `entityID`; its waiters fail with `CancellationError`.
  public func cancel(_ entityID: String) {
    state.withLock { $0.providers.removeValue(forKey: entityID) }?.task.cancel()
  }

  /// Empties the table (entries already retrieved keep their pixels).
  public func reset() {
    let (running, failures) = state.withLock { state -> ([Task<ImageTableEntry, any Error>], [PipelineError]) in
      var failures: [PipelineError] = []
      for slot in state.slots.values {
        do throws(PipelineError) { try file.clear(slot) } catch { failures.append(error) }
      }
      state.slots.removeAll()
      state.verified.removeAll()
      defer { state.providers.removeAll() }
      return (state.providers.values.map(\.task), failures)
    }
    for task in running { task.cancel() }
    for failure in failures.prefix(1) { report(failure) }
  }

  /// An empty slot, or the least recently used one that is not leased or being written.
  private func freeSlot(in state: inout State) -> Int? {
    let used = Set(state.slots.values)
    var oldest: (slot: Int, access: UInt64)?
    for slot in 0..<format.maxCount where !state.writing.contains(slot) && state.leases[slot, default: 0] == 0 {
      guard used.contains(slot) else { return slot }
      let access = file.entry(slot)?.access ?? 0
      if let current = oldest, current.access <= access { continue }
      oldest = (slot, access)
    }
    guard let victim = oldest?.slot else { return nil }
    if let id = state.slots.first(where: { $0.value == victim })?.key { state.slots[id] = nil }
    return victim
  }

  /// After a short read or a store that found the file shorter than its format: another process
  /// truncated it. Restores its size and drops every entry whose bytes were cut (they would read
  /// as zeros now); returns what to report.
  private func repairTruncation() -> [PipelineError] {
    state.withLock { state in
      guard let length = file.currentSize, length < file.size else { return [] }
      do throws(PipelineError) {
        let lost = try file.repairTruncation(cutAt: length)
        let lostSet = Set(lost)
        state.slots = state.slots.filter { !lostSet.contains($0.value) }
        state.verified.subtract(lostSet)
        return [
          PipelineError(
            .cacheCorrupt,
            "the image table \(fileURL.path) was truncated to \(length) of \(file.size) bytes by another process; \(lost.count) entries were dropped and the file was restored"
          )
        ]
      } catch {
        return [error]
      }
    }
  }

  private func releaseLease(_ slot: Int) {
    state.withLock { state in
      let remaining = state.leases[slot, default: 1] - 1
      state.leases[slot] = remaining > 0 ? remaining : nil
    }
  }

  private func report(_ error: PipelineError) {
    guard let delegate = state.withLock({ $0.storedDelegate }) else { return }
    delegate.imageTable(self, didFail: error)
  }
}
