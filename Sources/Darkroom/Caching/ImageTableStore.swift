import Foundation

/// The `table` cache store: decoded images kept as raw pixels in an `ImageTable`, so a hit hands
/// libvips the entry's pixels — no decode, no resize; one copy out of the file's pages.
///
/// Put it after `decode`/`resize`/`crop` (it keeps decoded images). Images must be 8-bit with the
/// format's number of bands (RGB for `rgb8`…) and fit the format's width and height; anything
/// else is a `storeFailed` event with the reason. Keys are hashed to entity ids; each entry records
/// its source (for purging), expiry, validators and the source's format and size.
///
/// ```swift
/// let format = try ImageTableFormat(name: "thumb-300", width: 300, height: 300, layout: .rgb8, maxCount: 10_000)
/// let pipeline = Pipeline(name: "thumb") {
///   Fetcher(); ImageDecoder(); Resizer(width: 300, height: 300)
///   Cache<DecodedImage>(store: try ImageTableStore.open(directory: "/var/cache/tables", format: format))
///   ImageEncoder(.webp())
/// }
/// ```
public final class ImageTableStore: CacheStore {
  public let name = "table"
  package let table: ImageTable
  private let clock: @Sendable () -> Date
  private static let instances = StoreInstances<ImageTableStore>()

  private let pool: BlockingPool

  /// A store over `table`; stores, and the first read of each entry (which verifies its checksum
  /// over pages that may still be on disk), run on `pool`.
  package init(table: ImageTable, pool: BlockingPool = .shared, now: @escaping @Sendable () -> Date = { Date() }) {
    self.table = table
    self.pool = pool
    clock = now
  }

  /// The process's store for the table `format.name` in `directory` (tables are opened once: the
  /// file is locked). Purging it is the caller's: a `cache` stage loaded from JSON keeps it in its
  /// `PipelineResources`.
  public static func open(directory: String, format: ImageTableFormat) throws -> ImageTableStore {
    let path = URL(fileURLWithPath: directory).standardizedFileURL.path
    let store = try instances.instance(for: path + "/" + format.name) {
      ImageTableStore(table: try ImageTable(directory: path, format: format))
    }
    guard store.table.format == format else {
      throw PipelineError(
        .cacheUnavailable, "the table \(format.name) in \(path) is already open with another format in this process")
    }
    return store
  }

  public var now: Date { clock() }
  public var keeps: String { Self.keepsDescription }
  public static let keepsDescription = "decoded images (after decode, crop or resize)"
  public func accepts(_ type: Any.Type) -> Bool { type == DecodedImage.self }

  public func entry(forKey key: String) async throws -> CacheEntry? {
    let id = ImageTable.entityID(forKey: key)
    let table = table
    // A read is a blocking pread and a checksum: never on the cooperative pool.
    let found = try await pool.run { table.retrieve(id) }
    guard let entry = found else { return nil }
    let info = entry.info
    let shell = CacheEntry(value: 0, expiresAt: info.expiresAt, validators: info.validators)
    guard shell.isWorthKeeping(at: now) else {
      table.delete(id)
      return nil
    }
    let image = try VipsImage.wrapping(
      entry.pixels, width: entry.width, height: entry.height, bands: entry.layout.bands, owner: entry)
    let facts = SourceFacts(info.userInfo)
    let decoded = DecodedImage(
      source: ImageSource(cacheIdentity: String(CacheKey.sourceIdentity(of: key) ?? "")), image: image,
      sourceFormat: facts.format, sourceWidth: facts.width, sourceHeight: facts.height, partial: facts.partial)
    return CacheEntry(value: decoded, storedAt: info.writtenAt, expiresAt: info.expiresAt, validators: info.validators)
  }

  /// Decodes the image into memory once, for the next stage and for storing.
  public func prepare(_ value: any Sendable, context: StageContext) async throws -> any Sendable {
    guard var decoded = value as? DecodedImage else { return value }
    let image = decoded.image
    decoded.image = try await context.blocking { try image.materialized() }
    return decoded
  }

  public func setEntry(_ entry: CacheEntry, forKey key: String, source: String) async throws {
    guard let decoded = entry.value as? DecodedImage else {
      throw PipelineError(.cacheFailed, "the table store keeps \(keeps), not \(valueDescription(of: type(of: entry.value)))")
    }
    let format = table.format
    let image = decoded.image
    guard !image.isAnimated else {
      // A table entry is one picture: the frames would come back as one tall still image.
      throw PipelineError(
        .cacheFailed,
        "the table \"\(format.name)\" holds still images; this animation has \(image.frameCount) frames, so it is not stored "
          + "(cache animations in a memory or disk store)")
    }
    guard image.isEightBit, image.bands == format.layout.bands else {
      throw PipelineError(
        .cacheFailed,
        "the table \"\(format.name)\" holds 8-bit \(format.layout.rawValue) pixels; this image has \(image.bands) band(s)"
          + (image.isEightBit ? "" : " of more than 8 bits") + ": choose the layout that matches the images")
    }
    let info = ImageTableEntryInfo(
      entityID: "", width: image.width, height: image.height, writtenAt: entry.storedAt, expiresAt: entry.expiresAt,
      validators: entry.validators, sourceTag: ImageTable.sourceTag(for: source), userInfo: SourceFacts(decoded).bytes)
    let table = table
    // Writing to the table's file blocks (and may wait for the disk): off the cooperative pool.
    try await pool.run {
      let pixels = try image.pixelBytes()
      _ = try pixels.withUnsafeBytes { try table.store(ImageTable.entityID(forKey: key), pixels: $0, info: info) }
    }
  }

  public func refresh(key: String, expiresAt: Date?, validators: CacheValidators) async throws {
    table.refresh(ImageTable.entityID(forKey: key), expiresAt: expiresAt, validators: validators)
  }

  public func removeEntry(forKey key: String) async throws { table.delete(ImageTable.entityID(forKey: key)) }
  public func removeAll() async throws { table.reset() }

  public func purge(source: ImageSource) async throws -> Int {
    let tag = ImageTable.sourceTag(for: source.identity)
    return table.delete { $0.sourceTag == tag }
  }

  public func statistics() async throws -> CacheStatistics {
    let format = table.format
    return CacheStatistics(
      store: name, entries: table.count, bytes: table.count * format.slotBytes, byteLimit: format.maxCount * format.slotBytes,
      countLimit: format.maxCount, location: table.fileURL.path)
  }

  /// The source's format, size and partial flag, in an entry's 32 user bytes.
  struct SourceFacts {
    var format: ImageFormat
    var width: Int
    var height: Int
    var partial: Bool

    init(_ decoded: DecodedImage) {
      format = decoded.sourceFormat
      width = decoded.sourceWidth
      height = decoded.sourceHeight
      partial = decoded.partial
    }

    init(_ bytes: [UInt8]) {
      func word(_ offset: Int) -> Int {
        guard bytes.count >= offset + 4 else { return 0 }
        return (0..<4).reduce(0) { $0 | Int(bytes[offset + $1]) << (8 * $1) }
      }
      let index = bytes.first.map(Int.init) ?? 0
      format = index < ImageFormat.allCases.count ? ImageFormat.allCases[index] : .png
      width = word(1)
      height = word(5)
      partial = bytes.count > 9 && bytes[9] != 0
    }

    var bytes: [UInt8] {
      let index = UInt8(ImageFormat.allCases.firstIndex(of: format) ?? 0)
      let words = [width, height].flatMap { value in (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) } }
      return [index] + words + [partial ? 1 : 0]
    }
  }
}
