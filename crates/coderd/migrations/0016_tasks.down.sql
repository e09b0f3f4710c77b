DROP TABLE tasks;
