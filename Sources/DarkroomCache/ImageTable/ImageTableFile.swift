import DarkroomCore
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// What an image table records about one entry besides its pixels.
package struct ImageTableEntryInfo: Sendable, Hashable {
  /// The entity id (at most 64 UTF-8 bytes).
  public var entityID: String
  /// The stored image's size (at most the format's).
  public var width: Int
  public var height: Int
  public var writtenAt: Date
  /// When the entry stops being fresh (for cache stores); `nil`: never.
  public var expiresAt: Date?
  /// Validators for revalidation (an `ETag` of at most 64 bytes, a `Last-Modified` of at most 32).
  public var validators: CacheValidators
  /// 16 bytes naming the source, for purging by source.
  public var sourceTag: [UInt8]
  /// Up to 32 bytes for the caller.
  public var userInfo: [UInt8]

  public init(
    entityID: String, width: Int, height: Int, writtenAt: Date = Date(), expiresAt: Date? = nil,
    validators: CacheValidators = .none, sourceTag: [UInt8] = [], userInfo: [UInt8] = []
  ) {
    self.entityID = entityID
    self.width = width
    self.height = height
    self.writtenAt = writtenAt
    self.expiresAt = expiresAt
    self.validators = validators
    self.sourceTag = sourceTag
    self.userInfo = userInfo
  }
}

/// The file of one image table: a header page, a directory of 256-byte entry headers, then
/// `maxCount` page-aligned pixel slots.
///
/// Nothing is memory-mapped: another process can truncate the file at any time (`flock` is only
/// advisory), and a fault in a mapping would kill this one with SIGBUS. Pixels are read and written
/// with `pread`/`pwrite`, so a truncated file is a short read and a full disk an error. The
/// directory of entry headers lives in memory (the file is locked by one process), verified entry
/// by entry when the file is opened, and every change is written through. Nothing read from the
/// file is trusted: the header page and every entry header are range-checked and covered by a
/// CRC-32. Closing (deinit) writes the access counters and releases the lock.
final class ImageTableFile: @unchecked Sendable {
  static let pageSize: Int = {
    let size = sysconf(Int32(_SC_PAGESIZE))
    return size >= 4096 && size.nonzeroBitCount == 1 ? size : 4096
  }()
  static let magic = Array("DRIMGTB1".utf8)
  /// 2: header CRCs, the page size in the file header; 1 (no header CRCs) is recreated on open.
  static let version: UInt32 = 2
  static let entryHeaderSize = 256
  /// Dates outside years 1–9999 (seconds since 1970) are damage.
  static let dateRange: ClosedRange<Double> = -62_135_596_800...253_402_300_799

  enum State: UInt32 {
    case empty = 0
    case writing = 1
    case valid = 2
  }

  /// One valid entry's header, as kept in memory.
  struct Header: Sendable {
    var checksum: UInt32
    var access: UInt64
    var info: ImageTableEntryInfo
  }

  /// Why a file could not be used as it is.
  enum Problem: Error {
    /// Another format, a damaged header page or a wrong size: recreate on request, else refuse.
    case mismatch(String)
    /// A table of an older version of this format: always recreated (it is a cache).
    case outdated
  }

  let path: String
  let format: ImageTableFormat
  let size: Int
  let directoryOffset: Int
  let slotsOffset: Int
  private let descriptor: Int32
  /// The valid entries' headers by slot, and the slots whose access counters are not on disk yet.
  private let state = Protected((headers: [Int: Header](), dirtyAccess: Set<Int>()))
  /// Entry headers found damaged when the file was opened (their slots were emptied).
  private(set) var droppedOnOpen: [(slot: Int, reason: String)] = []

  /// Opens (creating) the table file itself, never through a symlink and never blocking on a FIFO:
  /// a symlink in its place is removed (the link, not what it names) and a new file made; anything
  /// else that is not a regular file fails the open. Returns the descriptor, or -1 with `errno`.
  static func openOwnFile(_ path: String) -> Int32 {
    let flags = O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK
    var descriptor = Glibc.open(path, flags, 0o644)
    if descriptor < 0, errno == ELOOP, unlink(path) == 0 { descriptor = Glibc.open(path, flags, 0o644) }
    guard descriptor >= 0 else { return -1 }
    var status = stat()
    guard fstat(descriptor, &status) == 0, status.st_mode & S_IFMT == S_IFREG else {
      close(descriptor)
      errno = EINVAL
      return -1
    }
    _ = fcntl(descriptor, F_SETFL, fcntl(descriptor, F_GETFL) & ~O_NONBLOCK)
    return descriptor
  }

  static func roundToPage(_ bytes: Int) -> Int { (bytes + pageSize - 1) / pageSize * pageSize }

  /// Opens or creates the file and reads its directory; `recreateOnMismatch` recreates a file of
  /// another format (or a damaged one) instead of failing. Slots left `writing` and damaged
  /// entry headers are emptied.
  init(path: String, format: ImageTableFormat, recreateOnMismatch: Bool) throws {
    self.path = path
    self.format = format
    directoryOffset = Self.pageSize
    slotsOffset = Self.pageSize + Self.roundToPage(format.maxCount * Self.entryHeaderSize)
    size = slotsOffset + format.slotBytes * format.maxCount  // bounded by format.validate()
    descriptor = Self.openOwnFile(path)
    guard descriptor >= 0 else { throw Self.failure(.cacheUnavailable, "cannot open the image table \(path)") }
    // On failure the descriptor is closed by deinit, which runs because every stored property is
    // set by now; closing it here too would close whatever another thread opened next under the
    // same number (a double close, seen as EBADF in concurrent tests).
    try setUp(recreateOnMismatch: recreateOnMismatch)
  }

  private func setUp(recreateOnMismatch: Bool) throws {
    guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
      throw PipelineError(
        .cacheInUse,
        "the image table \(path) is locked by another process (another run has it open, or another open table in this one)"
      )
    }
    var status = stat()
    guard fstat(descriptor, &status) == 0 else { throw Self.failure(.cacheUnavailable, "cannot read the size of \(path)") }
    var fresh = status.st_size == 0
    if !fresh {
      do {
        try checkFileHeader(fileSize: Int(status.st_size))
      } catch Problem.outdated {
        fresh = true
      } catch Problem.mismatch(let reason) {
        guard recreateOnMismatch else {
          throw PipelineError(
            .cacheUnavailable,
            "the image table \(path) was made for another format or is damaged (\(reason)); delete it or open it with reset on mismatch"
          )
        }
        fresh = true
      }
    }
    if fresh {
      try create()
    } else {
      reserveIfPossible()
      try readDirectory()
    }
  }

  deinit {
    let pending = state.withLock { state in state.dirtyAccess.compactMap { slot in state.headers[slot].map { (slot, $0.access) } }
    }
    for (slot, access) in pending {
      var value = access.littleEndian
      _ = withUnsafeBytes(of: &value) { writeAll($0, at: directoryOffset + slot * Self.entryHeaderSize + 8) }
    }
    close(descriptor)
  }

  // MARK: Creating and checking the file

  /// Empties the file, sizes it, reserves its blocks and writes its header page.
  private func create() throws {
    guard ftruncate(descriptor, 0) == 0, ftruncate(descriptor, off_t(size)) == 0 else {
      throw Self.failure(.cacheUnavailable, "cannot size the image table \(path) to \(size) bytes")
    }
    try reserve(required: true)
    var page = [UInt8](repeating: 0, count: Self.pageSize)
    let header = fileHeader()
    page.replaceSubrange(0..<header.count, with: header)
    guard page.withUnsafeBytes({ writeAll($0, at: 0) }) == 0 else {
      let code = errno
      _ = ftruncate(descriptor, 0)
      throw Self.failure(.cacheUnavailable, "cannot write the header of the image table \(path)", code: code)
    }
  }

  /// Allocates every block of the file, so a full disk fails here rather than in a later store.
  /// File systems that cannot (`EOPNOTSUPP`) keep a sparse file: a store may then fail with
  /// `ENOSPC`, which it reports. `required`: a new file that does not fit is removed and fails.
  private func reserve(required: Bool) throws(PipelineError) {
    let result = posix_fallocate(descriptor, 0, off_t(size))
    guard result != 0, result != EOPNOTSUPP, result != ENOSYS, required else { return }
    _ = ftruncate(descriptor, 0)
    throw Self.failure(
      .cacheUnavailable,
      "cannot reserve \(size) bytes for the image table \(path); free space or lower the table's maxCount", code: result)
  }

  private func reserveIfPossible() { try? reserve(required: false) }

  /// The header page's fields: magic, version, layout, width, height, maxCount, page size, slot
  /// bytes, name and family (each a length byte and 64 bytes), then a CRC-32 of all of them.
  private func fileHeader() -> [UInt8] {
    var header = Self.magic
    append(Self.version, &header)
    append(UInt32(PixelLayout.allCases.firstIndex(of: format.layout) ?? 0), &header)
    append(UInt32(format.width), &header)
    append(UInt32(format.height), &header)
    append(UInt32(format.maxCount), &header)
    append(UInt32(Self.pageSize), &header)
    append(UInt64(format.slotBytes), &header)
    appendBytes(Array(format.name.utf8), capacity: 64, &header)
    appendBytes(Array(format.family.utf8), capacity: 64, &header)
    append(Checksum.crc32(header), &header)
    return header
  }

  /// Throws unless page 0 is exactly the header this format writes (the rest of the page zero)
  /// and the file has the size the format implies.
  private func checkFileHeader(fileSize: Int) throws(Problem) {
    var page = [UInt8](repeating: 0, count: Self.pageSize)
    let count = page.withUnsafeMutableBytes { readAll($0, at: 0) }
    guard count == Self.pageSize else { throw .mismatch("the file is shorter than its header page") }
    guard page.starts(with: Self.magic) else { throw .mismatch("not an image table") }
    let version = UInt32(littleEndian: page.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: 8, as: UInt32.self) })
    if (1..<Self.version).contains(version) { throw .outdated }
    guard version == Self.version else { throw .mismatch("version \(version), expected \(Self.version)") }
    let expected = fileHeader()
    guard page.prefix(expected.count).elementsEqual(expected) else {
      let crcOffset = expected.count - 4
      let stored = UInt32(littleEndian: page.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: crcOffset, as: UInt32.self) })
      let intact = Checksum.crc32(page.withUnsafeBytes { UnsafeRawBufferPointer(rebasing: $0[0..<crcOffset]) }) == stored
      throw .mismatch(intact ? "another format" : "its header fails its checksum")
    }
    guard page[expected.count...].allSatisfy({ $0 == 0 }) else { throw .mismatch("its header page has stray bytes") }
    guard fileSize == size else { throw .mismatch("\(fileSize) bytes, the format needs \(size)") }
  }

  /// Reads and verifies every entry header. Slots left `writing` (a killed process) and damaged
  /// headers are emptied on disk; of two valid entries with one id, the more recent is kept.
  /// Access counters are renumbered 1…n in their order, so none read from the file can overflow.
  private func readDirectory() throws {
    let chunkSlots = max(1, (1 << 20) / Self.entryHeaderSize)
    var chunk = [UInt8](repeating: 0, count: chunkSlots * Self.entryHeaderSize)
    var found: [Int: Header] = [:]
    var owners: [String: Int] = [:]
    var cleared: [Int] = []
    var first = 0
    while first < format.maxCount {
      let slots = min(chunkSlots, format.maxCount - first)
      let bytes = slots * Self.entryHeaderSize
      let count = chunk.withUnsafeMutableBytes {
        readAll(UnsafeMutableRawBufferPointer(rebasing: $0[0..<bytes]), at: header(first))
      }
      guard count == bytes else {
        throw Self.failure(.cacheUnavailable, "cannot read the directory of the image table \(path)")
      }
      for index in 0..<slots {
        let slot = first + index
        let start = index * Self.entryHeaderSize
        let decoded = chunk.withUnsafeBytes {
          Self.decode(UnsafeRawBufferPointer(rebasing: $0[start..<start + Self.entryHeaderSize]), format: format)
        }
        switch decoded {
        case .empty:
          break
        case .writing:
          cleared.append(slot)
        case .damaged(let reason):
          cleared.append(slot)
          droppedOnOpen.append((slot, reason))
        case .valid(let entry):
          if let other = owners[entry.info.entityID], let kept = found[other] {
            let (loser, winner) = kept.access >= entry.access ? (slot, other) : (other, slot)
            cleared.append(loser)
            droppedOnOpen.append((loser, "a second entry for \"\(entry.info.entityID)\""))
            found[loser] = nil
            if winner == slot { found[slot] = entry }
            owners[entry.info.entityID] = winner
          } else {
            found[slot] = entry
            owners[entry.info.entityID] = slot
          }
        }
      }
      first += slots
    }
    var dirty: Set<Int> = []
    for (rank, slot) in found.keys.sorted(by: { (found[$0]?.access ?? 0, $0) < (found[$1]?.access ?? 0, $1) }).enumerated() {
      found[slot]?.access = UInt64(rank + 1)
      dirty.insert(slot)
    }
    state.withLock { state in
      state.dirtyAccess.formUnion(dirty)
      state.headers = found
    }
    for slot in cleared { _ = try? clear(slot) }
  }

  // MARK: Entry headers

  /// The byte offset of `slot`'s entry header.
  func header(_ slot: Int) -> Int { directoryOffset + slot * Self.entryHeaderSize }
  /// The byte offset of `slot`'s pixels.
  func pixels(_ slot: Int) -> Int { slotsOffset + slot * format.slotBytes }

  /// The valid entries' headers, by slot.
  var entries: [Int: Header] { state.withLock { $0.headers } }

  /// The header of the valid entry in `slot`.
  func entry(_ slot: Int) -> Header? { state.withLock { $0.headers[slot] } }

  /// The highest access counter (after opening: the number of entries).
  var latestAccess: UInt64 { state.withLock { $0.headers.values.map(\.access).max() ?? 0 } }

  func setAccess(_ value: UInt64, _ slot: Int) {
    state.withLock { state in
      guard state.headers[slot] != nil else { return }
      state.headers[slot]?.access = value
      state.dirtyAccess.insert(slot)  // written on close or with the header: recency is a hint
    }
  }

  /// Empties `slot`: forgotten in memory, and on disk a header of zeros (whose state is `empty`
  /// and which can never pass as valid, so no flipped state word brings an old entry back).
  func clear(_ slot: Int) throws(PipelineError) {
    state.withLock { state in
      state.headers[slot] = nil
      state.dirtyAccess.remove(slot)
    }
    try writeHeaderBytes([UInt8](repeating: 0, count: Self.entryHeaderSize), slot, what: "empty the entry header")
  }

  /// Marks `slot` as being written (only its state word: a process killed before the entry is
  /// complete leaves `writing`, which opening clears).
  func markWriting(_ slot: Int) throws(PipelineError) {
    state.withLock { state in
      state.headers[slot] = nil
      state.dirtyAccess.remove(slot)
    }
    var state = State.writing.rawValue.littleEndian
    let result = withUnsafeBytes(of: &state) { writeAll($0, at: header(slot)) }
    guard result == 0 else { throw Self.failure(.cacheFailed, "cannot write to the image table \(path)", code: result) }
  }

  /// Writes `slot`'s whole header with the state `valid`, in one write, after its pixels.
  func setValid(_ entry: Header, _ slot: Int) throws(PipelineError) {
    try writeHeaderBytes(Self.encode(entry, state: .valid), slot, what: "write the entry header")
    state.withLock { state in
      state.headers[slot] = entry
      state.dirtyAccess.remove(slot)
    }
  }

  /// Rewrites a valid entry's header with new info (its CRC recomputed).
  func update(_ slot: Int, _ change: (inout ImageTableEntryInfo) -> Void) throws(PipelineError) {
    guard var entry = entry(slot) else { return }
    change(&entry.info)
    try setValid(entry, slot)
  }

  private func writeHeaderBytes(_ bytes: [UInt8], _ slot: Int, what: String) throws(PipelineError) {
    let result = bytes.withUnsafeBytes { writeAll($0, at: header(slot)) }
    guard result == 0 else { throw Self.failure(.cacheFailed, "cannot \(what) in the image table \(path)", code: result) }
  }

  // MARK: Pixels

  /// Reads `buffer.count` bytes of `slot`'s pixels. `false` when the file ends before (it was
  /// truncated since it was opened) or the read fails.
  func readPixels(_ slot: Int, into buffer: UnsafeMutableRawBufferPointer) -> (complete: Bool, error: Int32) {
    let count = readAll(buffer, at: pixels(slot))
    return (count == buffer.count, count < 0 ? errno : 0)
  }

  /// Writes `bytes` as `slot`'s pixels; throws `cacheFailed` (with the reason: `ENOSPC`, `EIO`…).
  func writePixels(_ bytes: UnsafeRawBufferPointer, _ slot: Int) throws(PipelineError) {
    let result = writeAll(bytes, at: pixels(slot))
    guard result == 0 else {
      throw Self.failure(
        .cacheFailed, "cannot write \(bytes.count) bytes of pixels to the image table \(path)", code: result)
    }
  }

  /// The file's size now, or `nil` when it cannot be read.
  var currentSize: Int? {
    var status = stat()
    return fstat(descriptor, &status) == 0 ? Int(status.st_size) : nil
  }

  /// Restores a file that another process truncated: its size, blocks and header page, and the
  /// headers of `surviving` slots (whose headers and pixels were all below the cut); everything
  /// else is emptied in memory (its bytes are gone). Returns the slots emptied.
  func repairTruncation(cutAt length: Int) throws(PipelineError) -> [Int] {
    let lost = state.withLock { state -> [Int] in
      let lost = state.headers.keys.filter {
        header($0) + Self.entryHeaderSize > length || pixels($0) + format.slotBytes > length
      }
      for slot in lost {
        state.headers[slot] = nil
        state.dirtyAccess.remove(slot)
      }
      return lost
    }
    guard ftruncate(descriptor, off_t(size)) == 0 else {
      throw Self.failure(.cacheFailed, "cannot restore the size of the truncated image table \(path)")
    }
    reserveIfPossible()
    for slot in lost { _ = try? writeHeaderBytes([UInt8](repeating: 0, count: Self.entryHeaderSize), slot, what: "empty") }
    do {  // the header page, whole again (it may have been cut, or regrown as zeros)
      var page = [UInt8](repeating: 0, count: Self.pageSize)
      let header = fileHeader()
      page.replaceSubrange(0..<header.count, with: header)
      let result = page.withUnsafeBytes { writeAll($0, at: 0) }
      guard result == 0 else { throw Self.failure(.cacheFailed, "cannot rewrite the header of \(path)", code: result) }
    }
    return lost
  }

  // MARK: Encoding entry headers

  /// Entry header layout (little-endian): 0 state (u32), 4 pixel CRC-32 (u32), 8 access (u64),
  /// 16 written (f64, seconds since 1970), 24 expires (f64; NaN: never), 32 width (u32),
  /// 36 height (u32), 40 entity id (length byte + 64), 105 ETag (length + 64), 170
  /// Last-Modified (length + 32), 203 source tag (16), 219 user info (length + 32), 252 the
  /// header's CRC-32.
  ///
  /// The header CRC covers everything but the state word and the access counter: the state is the
  /// commit marker, written alone (`writing`) before the pixels and then with the whole header
  /// (`valid`) — an empty slot is all zeros, which never passes as valid; the access counter
  /// changes on every read and only orders eviction, so any value is harmless (opening renumbers
  /// them). Everything else is rewritten with a fresh CRC whenever it changes.
  static func encode(_ entry: Header, state: State) -> [UInt8] {
    var bytes = [UInt8](repeating: 0, count: entryHeaderSize)
    let info = entry.info
    bytes.withUnsafeMutableBytes { raw in
      raw.storeBytes(of: state.rawValue.littleEndian, toByteOffset: 0, as: UInt32.self)
      raw.storeBytes(of: entry.checksum.littleEndian, toByteOffset: 4, as: UInt32.self)
      raw.storeBytes(of: entry.access.littleEndian, toByteOffset: 8, as: UInt64.self)
      raw.storeBytes(of: info.writtenAt.timeIntervalSince1970.bitPattern.littleEndian, toByteOffset: 16, as: UInt64.self)
      let expires = info.expiresAt?.timeIntervalSince1970 ?? .nan
      raw.storeBytes(of: expires.bitPattern.littleEndian, toByteOffset: 24, as: UInt64.self)
      raw.storeBytes(of: UInt32(clamping: info.width).littleEndian, toByteOffset: 32, as: UInt32.self)
      raw.storeBytes(of: UInt32(clamping: info.height).littleEndian, toByteOffset: 36, as: UInt32.self)
    }
    put(Array(info.entityID.utf8), at: 40, capacity: 64, &bytes)
    put(Array((info.validators.etag.flatMap { $0.utf8.count <= 64 ? $0 : nil } ?? "").utf8), at: 105, capacity: 64, &bytes)
    put(
      Array((info.validators.lastModified.flatMap { $0.utf8.count <= 32 ? $0 : nil } ?? "").utf8), at: 170, capacity: 32, &bytes)
    for (index, byte) in info.sourceTag.prefix(16).enumerated() { bytes[203 + index] = byte }
    put(Array(info.userInfo.prefix(32)), at: 219, capacity: 32, &bytes)
    let crc = headerChecksum(bytes)
    bytes.withUnsafeMutableBytes { $0.storeBytes(of: crc.littleEndian, toByteOffset: 252, as: UInt32.self) }
    return bytes
  }

  /// The CRC-32 of an entry header's bytes 4..<8 and 16..<252.
  static func headerChecksum(_ bytes: [UInt8]) -> UInt32 {
    guard bytes.count >= 252 else { return 0 }
    return Checksum.crc32(Array(bytes[16..<252]), initial: Checksum.crc32(Array(bytes[4..<8])))
  }

  enum Decoded {
    case empty, writing
    case damaged(String)
    case valid(Header)
  }

  /// Decodes and verifies one 256-byte entry header: the state word, the header CRC, the size
  /// against the format, finite dates within years 1–9999, every length byte against its field's
  /// capacity, the entity id non-empty UTF-8.
  static func decode(_ raw: UnsafeRawBufferPointer, format: ImageTableFormat) -> Decoded {
    guard raw.count == entryHeaderSize else { return .damaged("a short entry header") }
    func u32(_ offset: Int) -> UInt32 { UInt32(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
    func u64(_ offset: Int) -> UInt64 { UInt64(littleEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
    func field(_ offset: Int, capacity: Int) -> [UInt8]? {
      let count = Int(raw[offset])
      guard count <= capacity else { return nil }
      return Array(raw[offset + 1..<offset + 1 + count])
    }
    guard let state = State(rawValue: u32(0)) else { return .damaged("an unknown state \(u32(0))") }
    switch state {
    case .empty: return .empty
    case .writing: return .writing
    case .valid: break
    }
    guard headerChecksum(Array(raw)) == u32(252) else { return .damaged("the entry header fails its checksum") }
    let width = Int(u32(32))
    let height = Int(u32(36))
    guard (1...format.width).contains(width), (1...format.height).contains(height) else {
      return .damaged("a \(width)×\(height) entry in a \(format.width)×\(format.height) table")
    }
    let written = Double(bitPattern: u64(16))
    let expires = Double(bitPattern: u64(24))
    guard dateRange.contains(written), expires.isNaN || dateRange.contains(expires) else {
      return .damaged("a date out of range")
    }
    guard let id = field(40, capacity: 64), !id.isEmpty, let entityID = String(validating: id, as: UTF8.self),
      let etag = field(105, capacity: 64).flatMap({ String(validating: $0, as: UTF8.self) }),
      let lastModified = field(170, capacity: 32).flatMap({ String(validating: $0, as: UTF8.self) }),
      let userInfo = field(219, capacity: 32)
    else { return .damaged("a text field longer than its capacity or not UTF-8") }
    let info = ImageTableEntryInfo(
      entityID: entityID, width: width, height: height, writtenAt: Date(timeIntervalSince1970: written),
      expiresAt: expires.isNaN ? nil : Date(timeIntervalSince1970: expires),
      validators: CacheValidators(etag: etag, lastModified: lastModified), sourceTag: Array(raw[203..<219]),
      userInfo: userInfo)
    return .valid(Header(checksum: u32(4), access: u64(8), info: info))
  }

  private static func put(_ field: [UInt8], at offset: Int, capacity: Int, _ bytes: inout [UInt8]) {
    let count = min(field.count, capacity)
    bytes[offset] = UInt8(count)
    bytes.replaceSubrange(offset + 1..<offset + 1 + count, with: field.prefix(count))
  }

  // MARK: Bounded I/O

  /// Reads up to `buffer.count` bytes at `offset`: the count read (less at the end of the file),
  /// or -1 with `errno` set.
  func readAll(_ buffer: UnsafeMutableRawBufferPointer, at offset: Int) -> Int {
    DescriptorIO.readAll(descriptor, into: buffer, at: offset)
  }

  /// Writes all of `bytes` at `offset`; returns 0, or the `errno` of the failure.
  func writeAll(_ bytes: UnsafeRawBufferPointer, at offset: Int) -> Int32 {
    DescriptorIO.writeAll(descriptor, bytes, at: offset) ?? 0
  }

  private func append<T: FixedWidthInteger>(_ value: T, _ bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
  }

  private func appendBytes(_ field: [UInt8], capacity: Int, _ bytes: inout [UInt8]) {
    let utf8 = Array(field.prefix(capacity))
    bytes.append(UInt8(utf8.count))
    bytes.append(contentsOf: utf8 + Array(repeating: 0, count: capacity - utf8.count))
  }

  static func failure(_ kind: PipelineError.Code, _ what: String, code number: Int32 = errno) -> PipelineError {
    let reason = String(cString: strerror(number))
    return PipelineError(kind, "\(what): \(reason)", cause: LibraryMessage(library: "posix", text: reason))
  }
}

extension ImageTable {
  /// The size of a table file of `format` (header page, directory, slots).
  package static func fileSize(for format: ImageTableFormat) -> Int {
    ImageTableFile.pageSize + ImageTableFile.roundToPage(format.maxCount * ImageTableFile.entryHeaderSize) + format.slotBytes
      * format.maxCount
  }

  /// Recomputes the CRC-32 of the header page and of every entry header in a table file's bytes,
  /// so that a fuzzer's changes reach the range checks behind the checksums.
  package static func sealHeaders(_ file: inout [UInt8], format: ImageTableFormat) {
    let headerFields = 8 + 4 * 6 + 8 + 65 + 65
    if file.count >= headerFields + 4 {
      let crc = Checksum.crc32(Array(file[0..<headerFields]))
      withUnsafeBytes(of: crc.littleEndian) { file.replaceSubrange(headerFields..<headerFields + 4, with: $0) }
    }
    for slot in 0..<format.maxCount {
      let start = ImageTableFile.pageSize + slot * ImageTableFile.entryHeaderSize
      guard file.count >= start + ImageTableFile.entryHeaderSize else { return }
      let crc = ImageTableFile.headerChecksum(Array(file[start..<start + ImageTableFile.entryHeaderSize]))
      withUnsafeBytes(of: crc.littleEndian) { file.replaceSubrange(start + 252..<start + 256, with: $0) }
    }
  }
}
