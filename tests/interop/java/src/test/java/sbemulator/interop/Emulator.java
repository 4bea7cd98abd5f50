package sbemulator.interop;

import com.azure.core.http.HttpClient;
import com.azure.core.http.netty.NettyAsyncHttpClientBuilder;
import com.azure.core.http.policy.HttpPipelinePolicy;
import com.azure.core.util.UrlBuilder;
import com.azure.messaging.servicebus.ServiceBusClientBuilder;
import com.azure.messaging.servicebus.ServiceBusReceivedMessage;
import com.azure.messaging.servicebus.ServiceBusReceiverClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClient;
import com.azure.messaging.servicebus.administration.ServiceBusAdministrationClientBuilder;
import io.netty.handler.ssl.SslContext;
import io.netty.handler.ssl.SslContextBuilder;

import java.io.InputStream;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.KeyStore;
import java.security.cert.Certificate;
import java.security.cert.CertificateFactory;
import java.time.Duration;
import java.time.Instant;
import java.util.ArrayList;
import java.util.List;

import javax.net.ssl.TrustManagerFactory;

/**
 * What every scenario needs from the emulator under test: its connection string, its HTTPS admin endpoint
 * and the CA that signed that endpoint's certificate. tests/interop/test_java_sdk.py starts the emulator
 * and passes them in the environment, so this suite runs against any sbemulator (or the official one).
 */
final class Emulator {
    static final Duration RECEIVE_WAIT = Duration.ofSeconds(30);

    private Emulator() {
    }

    static String connectionString() {
        return required("SB_CONNECTION_STRING");
    }

    /** A connection string with the same endpoint and key name but a key the namespace does not have. */
    static String connectionStringWithWrongKey() {
        return connectionString().replaceAll("SharedAccessKey=[^;]*", "SharedAccessKey=not-the-key");
    }

    static ServiceBusClientBuilder builder() {
        return new ServiceBusClientBuilder().connectionString(connectionString());
    }

    /**
     * The administration client over HTTPS, trusting the emulator's own CA the way a Java application
     * trusts a private CA: a truststore holding that certificate, handed to the HTTP client's TLS
     * context. The builder keeps only the host of a connection string's endpoint (Service Bus always
     * listens on 443), so a policy puts the emulator's admin port back on every request.
     */
    static ServiceBusAdministrationClient admin() {
        URI url = URI.create(required("SB_ADMIN_URL"));
        int port = url.getPort();
        HttpPipelinePolicy toAdminPort = (context, next) -> {
            UrlBuilder target = UrlBuilder.parse(context.getHttpRequest().getUrl());
            target.setPort(port);
            context.getHttpRequest().setUrl(target.toString());
            return next.process();
        };
        return new ServiceBusAdministrationClientBuilder()
            .connectionString(connectionString())
            .httpClient(trustingHttpClient())
            .addPolicy(toAdminPort)
            .buildClient();
    }

    private static HttpClient trustingHttpClient() {
        try {
            KeyStore trustStore = KeyStore.getInstance(KeyStore.getDefaultType());
            trustStore.load(null, null);
            try (InputStream pem = Files.newInputStream(Path.of(required("SB_CA_PATH")))) {
                int i = 0;
                for (Certificate cert : CertificateFactory.getInstance("X.509").generateCertificates(pem)) {
                    trustStore.setCertificateEntry("sbemulator-ca-" + i++, cert);
                }
            }
            TrustManagerFactory tmf = TrustManagerFactory.getInstance(TrustManagerFactory.getDefaultAlgorithm());
            tmf.init(trustStore);
            SslContext ssl = SslContextBuilder.forClient().trustManager(tmf).build();
            reactor.netty.http.client.HttpClient netty = reactor.netty.http.client.HttpClient.create()
                .secure(spec -> spec.sslContext(ssl));
            return new NettyAsyncHttpClientBuilder(netty).build();
        } catch (Exception e) {
            throw new IllegalStateException("cannot trust the emulator's CA at " + System.getenv("SB_CA_PATH"), e);
        }
    }

    static String required(String name) {
        String value = System.getenv(name);
        if (value == null || value.isEmpty()) {
            throw new IllegalStateException(name + " is not set: run this suite through tests/interop/test_java_sdk.py");
        }
        return value;
    }

    /** Up to {@code count} messages within {@code wait}: one receive call returns what arrived by then. */
    static List<ServiceBusReceivedMessage> receive(ServiceBusReceiverClient receiver, int count, Duration wait) {
        List<ServiceBusReceivedMessage> out = new ArrayList<>();
        Instant deadline = Instant.now().plus(wait);
        // Each call may wait until the deadline: it returns once the messages are in (the SDK ends a call
        // shortly after the last one arrives). A call that ends first on a loaded machine while its credit
        // is out lets the SDK release what arrives later, which then comes back after newer messages.
        while (out.size() < count && Instant.now().isBefore(deadline)) {
            Duration left = Duration.between(Instant.now(), deadline);
            Duration call = left.compareTo(Duration.ofMillis(100)) < 0 ? Duration.ofMillis(100) : left;
            receiver.receiveMessages(count - out.size(), call).forEach(out::add);
        }
        return out;
    }

    static List<ServiceBusReceivedMessage> receive(ServiceBusReceiverClient receiver, int count) {
        return receive(receiver, count, RECEIVE_WAIT);
    }

    static List<String> ids(List<ServiceBusReceivedMessage> messages) {
        List<String> out = new ArrayList<>();
        for (ServiceBusReceivedMessage m : messages) {
            out.add(m.getMessageId());
        }
        return out;
    }

}
