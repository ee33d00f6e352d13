/// An image file format Darkroom knows by name.
///
/// The trusted formats (decoded and encoded) are `jpeg`, `png`, `gif`, `webp`, `tiff` (decode
/// only), `heif` (decode only) and `avif`. Other formats are recognised from their magic bytes
/// only to say precisely what was refused.
///
/// ```swift
/// let format = ImageFormat.sniff([0xFF, 0xD8, 0xFF, 0xE0])   // .jpeg
/// format?.mimeType        // "image/jpeg"
/// format?.fileExtension   // "jpg"
/// ```
public enum ImageFormat: String, Sendable, Hashable, Codable, CaseIterable, CustomStringConvertible {
  case jpeg, png, gif, webp, tiff, heif, avif
  // Recognised but never decoded (untrusted or unsupported loaders):
  case bmp, pdf, svg, jpeg2000, psd, ico, pnm, qoi, jpegxl, ole2, gzip

  /// Formats whose decoders Darkroom trusts with untrusted input.
  public static let trustedDecodable: [ImageFormat] = [.jpeg, .png, .gif, .webp, .tiff, .heif, .avif]
  /// Formats the encoder can write.
  public static let encodable: [ImageFormat] = [.jpeg, .png, .webp, .avif, .gif]

  /// The usual file extension.
  public var fileExtension: String {
    switch self {
    case .jpeg: "jpg"
    case .jpeg2000: "jp2"
    case .jpegxl: "jxl"
    case .ole2: "doc"
    case .gzip: "gz"
    default: rawValue
    }
  }

  /// The MIME type.
  public var mimeType: String {
    switch self {
    case .jpeg: "image/jpeg"
    case .png: "image/png"
    case .gif: "image/gif"
    case .webp: "image/webp"
    case .tiff: "image/tiff"
    case .heif: "image/heif"
    case .avif: "image/avif"
    case .bmp: "image/bmp"
    case .pdf: "application/pdf"
    case .svg: "image/svg+xml"
    case .jpeg2000: "image/jp2"
    case .psd: "image/vnd.adobe.photoshop"
    case .ico: "image/x-icon"
    case .pnm: "image/x-portable-anymap"
    case .qoi: "image/qoi"
    case .jpegxl: "image/jxl"
    case .ole2: "application/x-ole-storage"
    case .gzip: "application/gzip"
    }
  }

  /// The name people use for it in messages.
  public var description: String {
    switch self {
    case .jpeg: "JPEG"
    case .jpeg2000: "JPEG 2000"
    case .jpegxl: "JPEG XL"
    case .ole2: "an OLE2 document (Word, Excel…)"
    case .gzip: "gzip-compressed data (SVGZ?)"
    case .webp: "WebP"
    default: rawValue.uppercased()
    }
  }
}
