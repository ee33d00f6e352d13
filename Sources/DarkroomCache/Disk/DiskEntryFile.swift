import DarkroomCore
import Foundation

#if canImport(Glibc)
  import Glibc
#endif

/// One disk-cache entry file: a fixed header, JSON metadata and the payload, covered by a CRC-32.
///
/// Layout (little-endian): `DRKCACHE` · version u32 (3) · metadata length u32 · payload length
/// u64 · CRC-32 u32 · reserved u32 (0) · metadata · payload. The CRC-32 covers the header (but
/// itself), the metadata and the payload. The metadata names the key, so a file never answers for
/// another key. Anything that does not add up is `cacheCorrupt`.
enum DiskEntryFile {
  static let magic = Array("DRKCACHE".utf8)
  static let version: UInt32 = 3
  static let headerSize = 32

  /// The key, the type tag and the fields, as length-prefixed UTF-8 strings (u32 little-endian
  /// lengths): key, type, then name/value pairs.
  struct Metadata: Equatable {
    var key: String
    var type: String
    var fields: [String: String]

    func encoded() -> [UInt8] {
      var bytes: [UInt8] = []
      for text in [key, type] + fields.sorted(by: { $0.key < $1.key }).flatMap({ [$0.key, $0.value] }) {
        let utf8 = Array(text.utf8)
        withUnsafeBytes(of: UInt32(utf8.count).littleEndian) { bytes.append(contentsOf: $0) }
        bytes.append(contentsOf: utf8)
      }
      return bytes
    }

    init(key: String, type: String, fields: [String: String]) {
      self.key = key
      self.type = type
      self.fields = fields
    }

    /// Decodes ``encoded()``; `nil` when the bytes do not parse exactly.
    init?(_ bytes: [UInt8]) {
      var strings: [String] = []
      var offset = 0
      while offset < bytes.count {
        guard bytes.count - offset >= 4 else { return nil }
        let count = bytes.withUnsafeBytes { Int(UInt32(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: UInt32.self))) }
        offset += 4
        guard count <= bytes.count - offset else { return nil }
        strings.append(String(decoding: bytes[offset..<(offset + count)], as: UTF8.self))
        offset += count
      }
      guard strings.count >= 2, strings.count % 2 == 0 else { return nil }
      key = strings[0]
      type = strings[1]
      fields = [:]
      for index in stride(from: 2, to: strings.count, by: 2) { fields[strings[index]] = strings[index + 1] }
    }
  }

  /// Writes an entry to `descriptor` (a new temporary file, `path` names it in errors) and flushes
  /// it to disk; returns its size.
  @discardableResult
  static func write(to descriptor: Int32, path: String, key: String, record: CacheRecord, type: String) throws -> Int {
    let metadata = Metadata(key: key, type: type, fields: record.fields).encoded()
    var header = magic
    append(version, to: &header)
    append(UInt32(truncatingIfNeeded: metadata.count), to: &header)
    append(UInt64(record.payload.count), to: &header)
    append(UInt32(0), to: &header)  // the checksum, below
    append(UInt32(0), to: &header)  // reserved
    let crc = checksum(header: header, metadata: metadata, payload: record.payload)
    withUnsafeBytes(of: crc.littleEndian) { header.replaceSubrange(24..<28, with: $0) }
    try header.withUnsafeBytes { try writeAll(descriptor, $0, path: path) }
    try metadata.withUnsafeBytes { try writeAll(descriptor, $0, path: path) }
    try record.payload.withUnsafeBytes { try writeAll(descriptor, $0, path: path) }
    guard fsync(descriptor) == 0 else { throw failure("cannot flush \(path) to disk") }
    return header.count + metadata.count + record.payload.count
  }

  /// The CRC-32 of the header (but its checksum field), the metadata and the payload.
  private static func checksum(header: [UInt8], metadata: [UInt8], payload: ImageBytes) -> UInt32 {
    var crc = header.withUnsafeBytes { Checksum.crc32(UnsafeRawBufferPointer(rebasing: $0[0..<24])) }
    header.withUnsafeBytes { crc = Checksum.crc32(UnsafeRawBufferPointer(rebasing: $0[28..<32]), initial: crc) }
    crc = Checksum.crc32(metadata, initial: crc)
    payload.withUnsafeBytes { crc = Checksum.crc32($0, initial: crc) }
    return crc
  }

  /// The largest metadata accepted (1 MiB).
  static let maxMetadataBytes = 1 << 20

  /// Reads and verifies the entry open at `descriptor` (a regular file of `fileSize` bytes; `path`
  /// names it in errors). Every header field is range-checked and covered by the checksum, and
  /// nothing is allocated before the lengths are known to be within `maxPayloadBytes` (the store's
  /// `maxBytes`) and to add up to the file's size. Anything else — another key, another version,
  /// a torn or flipped file — is `cacheCorrupt`.
  static func read(
    descriptor: Int32, fileSize: Int, key: String, maxPayloadBytes: Int, path: String
  ) throws -> (type: String, record: CacheRecord) {
    guard fileSize >= headerSize else { throw corrupt(path, "shorter than its header") }
    var header = [UInt8](repeating: 0, count: headerSize)
    try header.withUnsafeMutableBytes { try readAll(descriptor, $0, at: 0, path: path) }
    guard Array(header[0..<8]) == magic, load(UInt32.self, header, 8) == version, load(UInt32.self, header, 28) == 0 else {
      throw corrupt(path, "has a wrong header")
    }
    let declaredMetadata = load(UInt32.self, header, 12)
    let declaredPayload = load(UInt64.self, header, 16)
    let expected = load(UInt32.self, header, 24)
    // Bounded by limits first, so that the sum below cannot overflow and no length from the file
    // decides an allocation on its own.
    guard declaredMetadata >= 8, declaredMetadata <= UInt32(maxMetadataBytes),
      declaredPayload <= UInt64(max(0, maxPayloadBytes))
    else { throw corrupt(path, "declares lengths outside the store's limits") }
    let metadataCount = Int(declaredMetadata)
    let payloadCount = Int(declaredPayload)
    guard headerSize + metadataCount + payloadCount == fileSize else {
      throw corrupt(path, "is torn (its lengths do not add up to its size)")
    }
    var metadataBytes = [UInt8](repeating: 0, count: metadataCount)
    try metadataBytes.withUnsafeMutableBytes { try readAll(descriptor, $0, at: headerSize, path: path) }
    let payload = UnsafeMutableRawBufferPointer.allocate(byteCount: max(payloadCount, 1), alignment: 16)
    let bytes = ImageBytes(adopting: UnsafeMutableRawBufferPointer(start: payload.baseAddress, count: payloadCount))
    try readAll(descriptor, payload, count: payloadCount, at: headerSize + metadataCount, path: path)
    guard checksum(header: header, metadata: metadataBytes, payload: bytes) == expected else {
      throw corrupt(path, "failed its checksum")
    }
    guard let metadata = Metadata(metadataBytes), !metadata.type.isEmpty else {
      throw corrupt(path, "has unreadable metadata")
    }
    guard metadata.key == key else { throw corrupt(path, "belongs to another key") }
    return (metadata.type, CacheRecord(fields: metadata.fields, payload: bytes))
  }

  private static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
    withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
  }

  private static func load<T: FixedWidthInteger>(_ type: T.Type, _ bytes: [UInt8], _ offset: Int) -> T {
    bytes.withUnsafeBytes { T(littleEndian: $0.loadUnaligned(fromByteOffset: offset, as: T.self)) }
  }

  private static func writeAll(_ descriptor: Int32, _ buffer: UnsafeRawBufferPointer, path: String) throws {
    if let code = DescriptorIO.writeAll(descriptor, buffer) {
      errno = code
      throw failure("cannot write \(path)")
    }
  }

  private static func readAll(
    _ descriptor: Int32, _ buffer: UnsafeMutableRawBufferPointer, count: Int? = nil, at offset: Int, path: String
  ) throws {
    let total = count ?? buffer.count
    let done = DescriptorIO.readAll(descriptor, into: UnsafeMutableRawBufferPointer(rebasing: buffer[0..<total]), at: offset)
    if done < 0 { throw failure("cannot read \(path)") }
    if done < total { throw corrupt(path, "ended early") }
  }

  static func failure(_ what: String) -> PipelineError {
    let reason = String(cString: strerror(errno))
    let hint = errno == ENOSPC || errno == EDQUOT ? " (free space or lower the store's maxBytes)" : ""
    return PipelineError(.cacheFailed, "\(what): \(reason)\(hint)", cause: LibraryMessage(library: "posix", text: reason))
  }

  static func corrupt(_ path: String, _ why: String) -> PipelineError {
    PipelineError(.cacheCorrupt, "the cache entry \(path) \(why); it is ignored and removed")
  }
}
