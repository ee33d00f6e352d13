import DarkroomCore
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// What an image table records about one entry besides its pixels.
public struct ImageTableEntryInfo: Sendable, Hashable {
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

/// The memory-mapped file of one image table: a header page, a directory of 256-byte entry
/// headers, then `maxCount` page-aligned pixel slots. Closing (deinit) unmaps it and releases the
/// file's exclusive lock. Entries hold it, so the mapping outlives the table object if need be.
final class ImageTableFile: @unchecked Sendable {
  static let pageSize = Int(sysconf(Int32(_SC_PAGESIZE)))
  static let magic = Array("DRIMGTB1".utf8)
  static let version: UInt32 = 1
  static let entryHeaderSize = 256

  enum State: UInt32 {
    case empty = 0
    case writing = 1
    case valid = 2
  }

  let path: String
  let format: ImageTableFormat
  let base: UnsafeMutableRawPointer
  let size: Int
  let directoryOffset: Int
  let slotsOffset: Int
  private let descriptor: Int32

  static func roundToPage(_ bytes: Int) -> Int { (bytes + pageSize - 1) / pageSize * pageSize }

  /// Opens or creates the file; `reset` recreates a file of another format instead of failing.
  init(path: String, format: ImageTableFormat, recreateOnMismatch: Bool) throws {
    self.path = path
    self.format = format
    directoryOffset = Self.pageSize
    slotsOffset = Self.pageSize + Self.roundToPage(format.maxCount * Self.entryHeaderSize)
    size = slotsOffset + format.slotBytes * format.maxCount
    descriptor = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o644)
    guard descriptor >= 0 else { throw Self.failure("cannot open the image table \(path)") }
    guard flock(descriptor, LOCK_EX | LOCK_NB) == 0 else {
      close(descriptor)
      throw PipelineError(
        .cacheUnavailable, "the image table \(path) is in use by another process (or another open table in this one)")
    }
    var status = stat()
    fstat(descriptor, &status)
    var fresh = status.st_size == 0
    if !fresh, Int(status.st_size) != size || !Self.headerMatches(descriptor: descriptor, format: format) {
      guard recreateOnMismatch else {
        close(descriptor)
        throw PipelineError(
          .cacheUnavailable,
          "the image table \(path) was made for another format (or is damaged); delete it or open it with reset on mismatch")
      }
      fresh = true
    }
    if fresh {
      guard ftruncate(descriptor, 0) == 0, ftruncate(descriptor, off_t(size)) == 0 else {
        close(descriptor)
        throw Self.failure("cannot size the image table \(path) to \(size) bytes")
      }
    }
    guard let mapped = mmap(nil, size, PROT_READ | PROT_WRITE, MAP_SHARED, descriptor, 0), mapped != MAP_FAILED else {
      close(descriptor)
      throw Self.failure("cannot map the image table \(path)")
    }
    base = mapped
    if fresh { writeHeader() }
  }

  deinit {
    munmap(base, size)
    close(descriptor)
  }

  private func writeHeader() {
    var header = Self.magic
    append(Self.version, &header)
    append(UInt32(PixelLayout.allCases.firstIndex(of: format.layout) ?? 0), &header)
    append(UInt32(format.width), &header)
    append(UInt32(format.height), &header)
    append(UInt32(format.maxCount), &header)
    append(UInt32(0), &header)
    append(UInt64(format.slotBytes), &header)
    appendString(format.name, capacity: 64, &header)
    appendString(format.family, capacity: 64, &header)
    header.withUnsafeBytes { base.copyMemory(from: $0.baseAddress!, byteCount: $0.count) }
  }

  private static func headerMatches(descriptor: Int32, format: ImageTableFormat) -> Bool {
    var bytes = [UInt8](repeating: 0, count: 40)
    guard pread(descriptor, &bytes, 40, 0) == 40, Array(bytes[0..<8]) == magic else { return false }
    let words = (0..<5).map { index in
      bytes.withUnsafeBytes { UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: 8 + index * 4, as: UInt32.self)) }
    }
    return words[0] == version && Int(words[1]) == PixelLayout.allCases.firstIndex(of: format.layout)
      && Int(words[2]) == format.width && Int(words[3]) == format.height && Int(words[4]) == format.maxCount
  }

  // MARK: Entry headers

  func header(_ slot: Int) -> UnsafeMutableRawPointer { base + directoryOffset + slot * Self.entryHeaderSize }
  func pixels(_ slot: Int) -> UnsafeMutableRawPointer { base + slotsOffset + slot * format.slotBytes }

  func state(_ slot: Int) -> State { State(rawValue: header(slot).load(as: UInt32.self)) ?? .empty }
  func setState(_ state: State, _ slot: Int) {
    // The state word is written last on store and first on change, so a crash in between leaves
    // `writing`, which opening clears.
    header(slot).storeBytes(of: state.rawValue, as: UInt32.self)
  }
  func checksum(_ slot: Int) -> UInt32 { header(slot).load(fromByteOffset: 4, as: UInt32.self) }
  func access(_ slot: Int) -> UInt64 { header(slot).load(fromByteOffset: 8, as: UInt64.self) }
  func setAccess(_ value: UInt64, _ slot: Int) { header(slot).storeBytes(of: value, toByteOffset: 8, as: UInt64.self) }

  func info(_ slot: Int) -> ImageTableEntryInfo {
    let pointer = header(slot)
    let expires = pointer.load(fromByteOffset: 24, as: Double.self)
    return ImageTableEntryInfo(
      entityID: string(pointer, at: 40),
      width: Int(pointer.load(fromByteOffset: 32, as: UInt32.self)),
      height: Int(pointer.load(fromByteOffset: 36, as: UInt32.self)),
      writtenAt: Date(timeIntervalSince1970: pointer.load(fromByteOffset: 16, as: Double.self)),
      expiresAt: expires.isNaN ? nil : Date(timeIntervalSince1970: expires),
      validators: CacheValidators(etag: string(pointer, at: 105), lastModified: string(pointer, at: 170)),
      sourceTag: Array(UnsafeRawBufferPointer(start: pointer + 203, count: 16)),
      userInfo: bytes(pointer, at: 219))
  }

  /// Writes everything but the state and checksum.
  func setInfo(_ info: ImageTableEntryInfo, checksum: UInt32, _ slot: Int) {
    let pointer = header(slot)
    pointer.storeBytes(of: checksum, toByteOffset: 4, as: UInt32.self)
    pointer.storeBytes(of: info.writtenAt.timeIntervalSince1970, toByteOffset: 16, as: Double.self)
    pointer.storeBytes(of: info.expiresAt?.timeIntervalSince1970 ?? .nan, toByteOffset: 24, as: Double.self)
    pointer.storeBytes(of: UInt32(info.width), toByteOffset: 32, as: UInt32.self)
    pointer.storeBytes(of: UInt32(info.height), toByteOffset: 36, as: UInt32.self)
    setString(info.entityID, pointer, at: 40, capacity: 64)
    setString(info.validators.etag.flatMap { $0.utf8.count <= 64 ? $0 : nil } ?? "", pointer, at: 105, capacity: 64)
    setString(info.validators.lastModified.flatMap { $0.utf8.count <= 32 ? $0 : nil } ?? "", pointer, at: 170, capacity: 32)
    let tag = Array(info.sourceTag.prefix(16)) + Array(repeating: 0, count: max(0, 16 - info.sourceTag.count))
    tag.withUnsafeBytes { (pointer + 203).copyMemory(from: $0.baseAddress!, byteCount: 16) }
    setBytes(Array(info.userInfo.prefix(32)), pointer, at: 219, capacity: 32)
  }

  private func string(_ pointer: UnsafeMutableRawPointer, at offset: Int) -> String {
    String(decoding: bytes(pointer, at: offset), as: UTF8.self)
  }

  private func bytes(_ pointer: UnsafeMutableRawPointer, at offset: Int) -> [UInt8] {
    let count = Int(pointer.load(fromByteOffset: offset, as: UInt8.self))
    return Array(UnsafeRawBufferPointer(start: pointer + offset + 1, count: count))
  }

  private func setString(_ text: String, _ pointer: UnsafeMutableRawPointer, at offset: Int, capacity: Int) {
    setBytes(Array(text.utf8), pointer, at: offset, capacity: capacity)
  }

  private func setBytes(_ bytes: [UInt8], _ pointer: UnsafeMutableRawPointer, at offset: Int, capacity: Int) {
    let count = min(bytes.count, capacity)
    pointer.storeBytes(of: UInt8(count), toByteOffset: offset, as: UInt8.self)
    bytes.withUnsafeBytes { source in
      if count > 0 { (pointer + offset + 1).copyMemory(from: source.baseAddress!, byteCount: count) }
    }
  }

  private func append<T: FixedWidthInteger>(_ value: T, _ bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
  }

  private func appendString(_ text: String, capacity: Int, _ bytes: inout [UInt8]) {
    let utf8 = Array(text.utf8.prefix(capacity))
    bytes.append(UInt8(utf8.count))
    bytes.append(contentsOf: utf8 + Array(repeating: 0, count: capacity - utf8.count))
  }

  static func failure(_ what: String) -> PipelineError {
    let reason = String(cString: strerror(errno))
    return PipelineError(.cacheUnavailable, "\(what): \(reason)", cause: LibraryMessage(library: "posix", text: reason))
  }
}
