package io.tidelake.example;

import java.sql.Connection;
import java.sql.DatabaseMetaData;
import java.sql.DriverManager;
import java.sql.PreparedStatement;
import java.sql.ResultSet;
import java.sql.ResultSetMetaData;
import java.sql.SQLException;
import java.sql.Statement;
import java.util.Properties;

/**
 * tidelake through the Arrow Flight SQL JDBC driver: metadata, DDL, DML, a prepared query, time
 * travel and the changelog. Arguments: URL, user, password.
 */
public final class JdbcExample {
  public static void main(String[] args) throws SQLException {
    String url = args.length > 0 ? args[0] : "jdbc:arrow-flight-sql://127.0.0.1:50051?useEncryption=false";
    Properties props = new Properties();
    props.setProperty("user", args.length > 1 ? args[1] : "tidelake");
    props.setProperty("password", args.length > 2 ? args[2] : System.getenv("TIDELAKE_PASSWORD"));

    try (Connection conn = DriverManager.getConnection(url, props)) {
      DatabaseMetaData md = conn.getMetaData();
      System.out.println("connected to " + md.getDatabaseProductName() + " " + md.getDatabaseProductVersion());

      try (Statement st = conn.createStatement()) {
        st.execute("CREATE DATABASE IF NOT EXISTS shop");
        st.execute("CREATE TABLE IF NOT EXISTS shop.stock (sku BIGINT NOT NULL, name STRING, qty INT,"
            + " PRIMARY KEY (sku)) WITH ('bucket' = '2', 'changelog-producer' = 'lookup')");
        st.executeUpdate("INSERT INTO shop.stock VALUES (1, 'apple', 10), (2, 'pear', 4)");
        int updated = st.executeUpdate("UPDATE shop.stock SET qty = qty - 1 WHERE sku = 1");
        System.out.println("updated " + updated + " row(s)");
      }

      try (ResultSet rs = md.getTables("tidelake", "shop", "%", null)) {
        while (rs.next()) {
          System.out.println("table " + rs.getString("TABLE_SCHEM") + "." + rs.getString("TABLE_NAME"));
        }
      }

      try (PreparedStatement ps = conn.prepareStatement("SELECT sku, name, qty FROM shop.stock WHERE qty >= ?")) {
        ps.setInt(1, 5);
        print(ps.executeQuery());
      }

      try (Statement st = conn.createStatement()) {
        System.out.println("-- the first snapshot");
        print(st.executeQuery("SELECT * FROM shop.stock FOR SYSTEM_TIME AS OF 1"));
        System.out.println("-- every change so far");
        print(st.executeQuery("SELECT _row_kind, _snapshot_id, sku, qty FROM shop.stock$changelog ORDER BY _snapshot_id"));
      }
    }
  }

  private static void print(ResultSet rs) throws SQLException {
    try (rs) {
      ResultSetMetaData m = rs.getMetaData();
      while (rs.next()) {
        StringBuilder line = new StringBuilder();
        for (int i = 1; i <= m.getColumnCount(); i++) {
          if (i > 1) {
            line.append(" | ");
          }
          line.append(m.getColumnLabel(i)).append('=').append(rs.getObject(i));
        }
        System.out.println(line);
      }
    }
  }
}
