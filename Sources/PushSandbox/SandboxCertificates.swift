import Crypto
import Foundation
import NIOSSL
import SwiftASN1
import X509

/// A throwaway certificate authority and a server certificate for `localhost` / 127.0.0.1, so the
/// sandbox speaks real TLS and clients trust it through one CA file (`tls.ca_file`). The same CA
/// issues APNs client certificates (``issueAPNsClientCertificate(topic:directory:)``), which the
/// sandbox accepts for certificate authentication as APNs accepts Apple-issued ones.
public struct SandboxCertificates: Sendable {
    /// The CA certificate in PEM, written to ``caFile``.
    public let caPEM: String
    /// Where the CA certificate was written.
    public let caFile: String
    let serverCertificatePEM: String
    let serverKeyPEM: String
    private let caKey: P256.Signing.PrivateKey
    private let caName: DistinguishedName

    /// The subject prefix of Apple's APNs certificates ("Apple Push Services: com.example.app");
    /// the bundle id after it is the topic the certificate may push to.
    public static let apnsSubjectPrefix = "Apple Push Services: "

    /// Generates a CA and a server certificate valid for a year and writes the CA to `directory/sandbox-ca.pem`.
    public static func generate(directory: String) throws -> SandboxCertificates {
        let caKey = P256.Signing.PrivateKey()
        // A name of its own per CA: a client trusting two sandboxes' CAs finds each server's issuer by name.
        let caName = try DistinguishedName { CommonName("PushRelay Sandbox CA \(UInt32.random(in: 0...UInt32.max))") }
        let ca = try signed(
            publicKey: caKey.publicKey,
            subject: caName,
            issuer: caName,
            issuerKey: caKey,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true))
            }
        )
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let caFile = (directory as NSString).appendingPathComponent(caFileName)
        let caPEM = try ca.serializeAsPEM().pemString
        try caPEM.write(toFile: caFile, atomically: true, encoding: .utf8)
        return try issuingServerCertificate(caPEM: caPEM, caFile: caFile, caKey: caKey, caName: caName)
    }

    /// The CA certificate's file name in the directory.
    public static let caFileName = "sandbox-ca.pem"
    /// The file name of the CA's private key, which ``open(directory:)`` keeps (mode 0600).
    public static let caKeyFileName = "sandbox-ca-key.pem"

    /// The CA of an earlier run, when `directory` holds it (``caFileName`` and ``caKeyFileName``,
    /// matching, valid for another day at least), with a new server certificate; otherwise a new CA
    /// as ``generate(directory:)`` makes, whose key is kept for the next run.
    public static func open(directory: String) throws -> SandboxCertificates {
        let caFile = (directory as NSString).appendingPathComponent(caFileName)
        let keyFile = (directory as NSString).appendingPathComponent(caKeyFileName)
        if let caPEM = try? String(contentsOfFile: caFile, encoding: .utf8),
            let keyPEM = try? String(contentsOfFile: keyFile, encoding: .utf8),
            let ca = try? Certificate(pemEncoded: caPEM),
            let caKey = try? P256.Signing.PrivateKey(pemRepresentation: keyPEM),
            ca.publicKey == Certificate.PublicKey(caKey.publicKey),
            ca.notValidAfter > Date() + 86_400
        {
            return try issuingServerCertificate(caPEM: caPEM, caFile: caFile, caKey: caKey, caName: ca.subject)
        }
        let made = try generate(directory: directory)
        try SandboxCredentials.writePrivate(made.caKey.pemRepresentation, to: keyFile)
        return made
    }

    /// A server certificate for `localhost` and 127.0.0.1 issued by the CA.
    private static func issuingServerCertificate(
        caPEM: String,
        caFile: String,
        caKey: P256.Signing.PrivateKey,
        caName: DistinguishedName
    ) throws -> SandboxCertificates {
        let serverKey = P256.Signing.PrivateKey()
        let server = try signed(
            publicKey: serverKey.publicKey,
            subject: try DistinguishedName { CommonName("localhost") },
            issuer: caName,
            issuerKey: caKey,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames([.dnsName("localhost"), .ipAddress(ASN1OctetString(contentBytes: [127, 0, 0, 1]))])
            }
        )
        return SandboxCertificates(
            caPEM: caPEM,
            caFile: caFile,
            serverCertificatePEM: try server.serializeAsPEM().pemString,
            serverKeyPEM: serverKey.pemRepresentation,
            caKey: caKey,
            caName: caName
        )
    }

    /// Issues an APNs client certificate for `topic` (subject "Apple Push Services: <topic>") and
    /// writes it and its key as PEM to `directory/<name>.pem` and `directory/<name>-key.pem`.
    public func issueAPNsClientCertificate(
        topic: String,
        directory: String,
        name: String = "apns-client"
    ) throws -> (certificateFile: String, keyFile: String) {
        let key = P256.Signing.PrivateKey()
        let certificate = try Self.signed(
            publicKey: key.publicKey,
            subject: try DistinguishedName { CommonName(Self.apnsSubjectPrefix + topic) },
            issuer: caName,
            issuerKey: caKey,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true))
                try ExtendedKeyUsage([.clientAuth])
            }
        )
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let certificateFile = (directory as NSString).appendingPathComponent("\(name).pem")
        let keyFile = (directory as NSString).appendingPathComponent("\(name)-key.pem")
        try certificate.serializeAsPEM().pemString.write(toFile: certificateFile, atomically: true, encoding: .utf8)
        try key.pemRepresentation.write(toFile: keyFile, atomically: true, encoding: .utf8)
        return (certificateFile, keyFile)
    }

    /// A certificate valid from an hour ago for a year, signed with ECDSA P-256 / SHA-256.
    private static func signed(
        publicKey: P256.Signing.PublicKey,
        subject: DistinguishedName,
        issuer: DistinguishedName,
        issuerKey: P256.Signing.PrivateKey,
        extensions: Certificate.Extensions
    ) throws -> Certificate {
        let now = Date()
        return try Certificate(
            version: .v3,
            serialNumber: .init(),
            publicKey: .init(publicKey),
            notValidBefore: now - 3600,
            notValidAfter: now + 365 * 86_400,
            issuer: issuer,
            subject: subject,
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: extensions,
            issuerPrivateKey: .init(issuerKey)
        )
    }

    /// The topic of an APNs client certificate this CA issued, from its subject; nil for any other
    /// certificate.
    static func apnsTopic(of certificate: NIOSSLCertificate) -> String? {
        guard let der = try? certificate.toDERBytes(), let parsed = try? Certificate(derEncoded: der) else { return nil }
        for attribute in parsed.subject.flatMap({ $0 }) where attribute.type == .RDNAttributeType.commonName {
            let name = attribute.value.description
            if name.hasPrefix(apnsSubjectPrefix) { return String(name.dropFirst(apnsSubjectPrefix.count)) }
        }
        return nil
    }

    /// The server side TLS configuration (TLS 1.2+).
    func serverTLSConfiguration() throws -> TLSConfiguration {
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: [.certificate(try NIOSSLCertificate(bytes: Array(serverCertificatePEM.utf8), format: .pem))],
            privateKey: .privateKey(try NIOSSLPrivateKey(bytes: Array(serverKeyPEM.utf8), format: .pem))
        )
        configuration.minimumTLSVersion = .tlsv12
        // APNs certificate authentication: a client may present a certificate, which must then be
        // one this CA issued; token-authenticated clients present none.
        configuration.trustRoots = .certificates([try NIOSSLCertificate(bytes: Array(caPEM.utf8), format: .pem)])
        configuration.certificateVerification = .optionalVerification
        return configuration
    }
}
