// End-to-end check of `quill serve` with PostgreSQL's JDBC driver
// (Debian's libpostgresql-jdbc-java): connect (the driver sends
// SET application_name), DDL, a batch of prepared inserts (several
// Executes before one Sync), server-side prepared statements after the
// driver's prepareThreshold, a transaction with rollback, an error with
// its SQLSTATE, getTransactionIsolation (SHOW TRANSACTION ISOLATION
// LEVEL) and current_schema(). Exits 1 on the first difference.
//
//   java -cp /usr/share/java/postgresql.jar tests/e2e/jdbc/QuillJdbc.java PORT

import java.sql.*;

public class QuillJdbc {
    static void check(boolean ok, String what) {
        if (!ok) {
            System.err.println("FAILED: " + what);
            System.exit(1);
        }
    }

    public static void main(String[] args) throws Exception {
        String url = "jdbc:postgresql://127.0.0.1:" + args[0] + "/jdbc?user=app&sslmode=disable";
        try (Connection c = DriverManager.getConnection(url)) {
            check(c.getTransactionIsolation() == Connection.TRANSACTION_READ_COMMITTED, "isolation");
            try (Statement s = c.createStatement()) {
                s.execute("DROP TABLE IF EXISTS j");
                s.execute("CREATE TABLE j (id int PRIMARY KEY, name varchar(20) NOT NULL, score double precision, at timestamp)");
                try (ResultSet rs = s.executeQuery("SELECT current_schema()")) {
                    check(rs.next() && rs.getString(1).equals("public"), "current_schema()");
                }
            }
            try (PreparedStatement p = c.prepareStatement("INSERT INTO j (id, name, score, at) VALUES (?, ?, ?, ?)")) {
                for (int i = 0; i < 20; i++) {
                    p.setInt(1, i);
                    p.setString(2, "n" + i);
                    p.setDouble(3, i * 0.5);
                    p.setTimestamp(4, Timestamp.valueOf("2026-11-24 12:00:0" + (i % 10)));
                    p.addBatch();
                }
                int[] counts = p.executeBatch();
                check(counts.length == 20, "batch counts");
            }
            try (PreparedStatement q = c.prepareStatement("SELECT name, score, at FROM j WHERE id = ?")) {
                for (int i = 0; i < 10; i++) { // past prepareThreshold (5)
                    q.setInt(1, i);
                    try (ResultSet rs = q.executeQuery()) {
                        check(rs.next(), "row " + i);
                        check(rs.getString(1).equals("n" + i), "name " + i);
                        check(rs.getDouble(2) == i * 0.5, "score " + i);
                        check(rs.getTimestamp(3).equals(Timestamp.valueOf("2026-11-24 12:00:0" + (i % 10))), "at " + i);
                    }
                }
            }
            c.setAutoCommit(false);
            try (Statement s = c.createStatement()) {
                s.executeUpdate("UPDATE j SET score = 100 WHERE id = 1");
                c.rollback();
                try (ResultSet rs = s.executeQuery("SELECT score FROM j WHERE id = 1")) {
                    check(rs.next() && rs.getDouble(1) == 0.5, "rolled back");
                }
                c.commit();
                try {
                    s.executeUpdate("INSERT INTO j (id, name) VALUES (1, 'dup')");
                    check(false, "duplicate accepted");
                } catch (SQLException e) {
                    check("23505".equals(e.getSQLState()), "SQLSTATE " + e.getSQLState());
                }
                c.rollback();
                try (ResultSet rs = s.executeQuery("SELECT count(*) FROM j")) {
                    check(rs.next() && rs.getLong(1) == 20, "count");
                }
                c.commit();
            }
        }
        System.out.println("JDBC (batches, server-side prepares, transactions, SQLSTATEs): ok");
    }
}
